package soak

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/dedup"
	"github.com/tulip-temporal/tulip/demo/witness"
	tworker "github.com/tulip-temporal/tulip/worker"
	"github.com/tulip-temporal/tulip/workflow"
)

// Record is an execution-log record.
type Record = dedup.Record

// Finding kinds.
const (
	// FindLog: a record differs from the reference's (origin, served-from
	// or call id); a duplicate when it executed where the reference serves.
	FindLog = "log"
	// FindServedReached: a call the reference serves reached a service.
	FindServedReached = "served_reached_service"
	// FindSecondEffect: an executed call reached its service again, not as
	// a later attempt with the same key.
	FindSecondEffect = "second_effect"
	// FindMissingEffect: an executed call of a completed run never reached
	// its service.
	FindMissingEffect = "missing_effect"
	// FindUnknownCall: a request that names no call of the soak.
	FindUnknownCall = "unknown_call"
)

// Finding is one violation the checker found: a run (index; -1: none),
// a call, what, and whether it is a duplicate side effect.
type Finding struct {
	Run       int
	Call      string
	Kind      string
	Detail    string
	Duplicate bool
}

func (f Finding) String() string {
	return fmt.Sprintf("run %d call %s: %s: %s", f.Run, f.Call, f.Kind, f.Detail)
}

// CheckThread compares a thread's final execution log with its
// reference's, record by record: linear in the records.
func CheckThread(got, want []Record) []Finding {
	var out []Finding
	for k := range max(len(got), len(want)) {
		if k >= len(got) || k >= len(want) {
			call := ""
			if k < len(got) {
				call = got[k].CallID
			} else {
				call = want[k].CallID
			}
			out = append(out, Finding{Run: callRun(call), Call: call, Kind: FindLog,
				Detail: fmt.Sprintf("the thread's log has %d records, alone %d", len(got), len(want))})
			break
		}
		g, w := got[k], want[k]
		if g.Origin == w.Origin && sameInt(g.ServedFrom, w.ServedFrom) && g.CallID == w.CallID {
			continue
		}
		out = append(out, Finding{Run: callRun(g.CallID), Call: g.CallID, Kind: FindLog,
			Detail:    fmt.Sprintf("record %d %s from %v, alone %s %s from %v", k, g.Origin, deref(g.ServedFrom), w.CallID, w.Origin, deref(w.ServedFrom)),
			Duplicate: g.Origin == dedup.Executed && w.Origin == dedup.Served})
	}
	return out
}

// Effects are what the reference runs say about each call: how many of its
// records executed (0: served), and its tool.
type Effects struct {
	Executed map[string]int
	Tool     map[string]string
}

// NewEffects indexes the reference logs.
func NewEffects(logs map[int][]Record) Effects {
	e := Effects{Executed: map[string]int{}, Tool: map[string]string{}}
	for _, recs := range logs {
		for _, r := range recs {
			e.Tool[r.CallID] = r.Tool
			if r.Origin == dedup.Executed {
				e.Executed[r.CallID]++
			} else if _, ok := e.Executed[r.CallID]; !ok {
				e.Executed[r.CallID] = 0
			}
		}
	}
	return e
}

// CheckWitnesses compares the services' requests with the reference: a
// served call reaches no service; an executed call reaches its service
// once per execution, and again only with the same key on a later attempt
// (retried). serviced says which tools call a service; completed whether a
// run completed (a missing effect is only a finding then).
func CheckWitnesses(reqs []witness.Request, ref Effects, serviced map[string]bool, completed func(run int) bool) (findings []Finding, retried int) {
	byCall := map[string][]witness.Request{}
	for _, r := range reqs {
		byCall[r.Call] = append(byCall[r.Call], r)
	}
	calls := make([]string, 0, len(byCall))
	for c := range byCall {
		calls = append(calls, c)
	}
	sort.Strings(calls)
	for _, call := range calls {
		rs := byCall[call]
		sort.SliceStable(rs, func(a, b int) bool { return rs[a].At.Before(rs[b].At) })
		n, known := ref.Executed[call]
		where := fmt.Sprintf("%s from %s (workflow %s run %s attempt %d)", rs[0].Service, rs[0].Tool, rs[0].Workflow, rs[0].Run, rs[0].Attempt)
		switch {
		case !known:
			findings = append(findings, Finding{Run: callRun(call), Call: call, Kind: FindUnknownCall, Detail: where, Duplicate: true})
			continue
		case n == 0:
			findings = append(findings, Finding{Run: callRun(call), Call: call, Kind: FindServedReached,
				Detail: fmt.Sprintf("served alone, reached %s, %d request(s)", where, len(rs)), Duplicate: true})
			continue
		}
		effects, again := countEffects(rs)
		retried += again
		if effects > n {
			findings = append(findings, Finding{Run: callRun(call), Call: call, Kind: FindSecondEffect,
				Detail: fmt.Sprintf("%d effects at %s, alone %d execution(s)", effects, where, n), Duplicate: true})
		}
	}
	for call, n := range ref.Executed {
		if n > 0 && serviced[ref.Tool[call]] && len(byCall[call]) == 0 && completed(callRun(call)) {
			findings = append(findings, Finding{Run: callRun(call), Call: call, Kind: FindMissingEffect,
				Detail: ref.Tool[call] + " executed alone, no request reached its service"})
		}
	}
	return findings, retried
}

// countEffects splits one call's requests (in time order) into effects
// and retries: a retry repeats an earlier request's key on a later attempt.
func countEffects(rs []witness.Request) (effects, retries int) {
	for k, r := range rs {
		retry := false
		for _, p := range rs[:k] {
			if p.Key == r.Key && r.Attempt > p.Attempt {
				retry = true
				break
			}
		}
		if retry {
			retries++
		} else {
			effects++
		}
	}
	return effects, retries
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int) any {
	if p == nil {
		return "-"
	}
	return *p
}

// threadLog is the execution log the thread's newest run holds (raw: thin
// records stay thin; origins, served-from and call ids are all there).
func threadLog(ctx context.Context, c client.Client, threadID string) ([]Record, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, threadID, "")
	if err != nil {
		return nil, fmt.Errorf("soak: thread %s: %w", threadID, err)
	}
	v, err := c.QueryWorkflow(ctx, threadID, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), workflow.QueryLog)
	if err != nil {
		return nil, fmt.Errorf("soak: thread %s's log: %w", threadID, err)
	}
	var recs []Record
	if err := v.Get(&recs); err != nil {
		return nil, fmt.Errorf("soak: thread %s's log: %w", threadID, err)
	}
	return recs, nil
}

// replayer replays histories from memory with one reused replayer.
type replayer struct {
	r      sdkworker.WorkflowReplayer
	logger sdklog.Logger
}

func newReplayer(opts tworker.Options, ro sdkworker.WorkflowReplayerOptions) (*replayer, error) {
	plugin, err := tworker.NewPlugin(opts)
	if err != nil {
		return nil, err
	}
	ro.Plugins = append(ro.Plugins, plugin)
	ro.DisableDeadlockDetection = true
	r, err := sdkworker.NewWorkflowReplayerWithOptions(ro)
	if err != nil {
		return nil, err
	}
	return &replayer{r: r, logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, nil
}

// replayChain replays run h and the runs it continued as, one history in
// memory at a time, and returns how many it replayed.
func (rp *replayer) replayChain(ctx context.Context, c client.Client, workflowID, runID string) (int, error) {
	n := 0
	for runID != "" {
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		hist := &historypb.History{}
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return n, fmt.Errorf("history of %s: %w", runID, err)
			}
			hist.Events = append(hist.Events, ev)
		}
		err := rp.r.ReplayWorkflowHistoryWithOptions(rp.logger, hist,
			sdkworker.ReplayWorkflowHistoryOptions{OriginalExecution: sdkworkflow.Execution{ID: workflowID, RunID: runID}})
		if err != nil {
			return n, fmt.Errorf("run %s does not replay: %s", runID, firstLine(err.Error()))
		}
		n++
		runID = ""
		if evs := hist.GetEvents(); len(evs) > 0 {
			runID = evs[len(evs)-1].GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return n, nil
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
