package agentrun

import (
	wf "go.temporal.io/sdk/workflow"
)

// baselineChange is the one version gate a run records at its start. A
// run that records it (at version 1) takes every change in
// baselineVersions at the version listed there, and records no marker of
// its own for them. Each gate a run records is a marker event and, through
// the SDK, an upsert of the TemporalChangeVersion search attribute: an
// event and a visibility write a run. Runs recorded before the baseline
// (no marker for it) replay gate by gate, as they ran.
const baselineChange = "tulip-baseline"

// baselineVersions are the changes the baseline covers, each at the
// version a run recorded with the baseline takes. The table is frozen: a
// change made after the baseline has a gate of its own (wf.GetVersion with
// a new change ID), and an entry here never changes its version.
// "tulip-plugin-required" keeps its own gate: it is asked only on a worker
// without the interceptor, so a run recorded with it has no marker for it,
// and its history replayed without the interceptor (to measure what the
// interceptor costs) goes on as it did, where the baseline would refuse it.
var baselineVersions = map[string]wf.Version{
	"tulip-thread-state":           1,
	"tulip-state-by-ref":           3,
	"tulip-parallel-calls":         1,
	"tulip-fork-hook-origin":       1,
	"tulip-held-args":              1,
	"tulip-keep-performed":         1,
	"tulip-fork-hold-call-only":    1,
	"tulip-interrupt-memo":         1,
	"tulip-client-timeout":         1,
	"tulip-subagent-not-self":      1,
	"tulip-compaction":             1,
	"tulip-stream-publishers":      1,
	"tulip-key-counter":            1,
	"tulip-save-failure-completes": 1,
	"tulip-unknown-outcome":        1,
	"tulip-unknown-hold-matches":   1,
}

// takeBaseline decides, once at the run's start, whether the run takes the
// baseline's versions (a new run) or its gates one by one (a run recorded
// before the baseline, replaying).
func (r *run) takeBaseline(ctx wf.Context) {
	r.baseline = wf.GetVersion(ctx, baselineChange, wf.DefaultVersion, 1) == 1
}

// version is the version of a change this run takes: under the
// baseline, the table's; else its own gate's (for a change the table does
// not hold, a gate of versions DefaultVersion and 1).
func (r *run) version(ctx wf.Context, change string) wf.Version {
	v, ok := baselineVersions[change]
	if !ok {
		return wf.GetVersion(ctx, change, wf.DefaultVersion, 1)
	}
	if r.baseline {
		return v
	}
	return wf.GetVersion(ctx, change, wf.DefaultVersion, v)
}
