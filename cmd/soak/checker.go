package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo/witness"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
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

// Finding is one violation the checker found: a run ("t3k5": thread 3's
// run 5; "?": none), a call, what, and whether it is a duplicate side
// effect.
type Finding struct {
	Run       string
	Call      string
	Kind      string
	Detail    string
	Duplicate bool
}

func (f Finding) String() string {
	return fmt.Sprintf("run %s call %s: %s: %s", f.Run, f.Call, f.Kind, f.Detail)
}

// Prefix is the records of ref made by runs 0..n-1 of its thread (they
// come first: a thread's log only grows).
func Prefix(ref []Record, n int) []Record {
	for k, r := range ref {
		if _, rk, _, ok := parseCall(r.CallID); ok && rk >= n {
			return ref[:k]
		}
	}
	return ref
}

// CheckThread compares a thread's final execution log with the reference
// thread's (Prefix: as far as this thread's runs went): each call's records
// (call ids compared with their thread left out, the n-th record of a call
// with the reference's n-th) must have the same origin and be served from
// the same call. Records are matched by call, not by position, so a record
// missing or extra is one finding, not a shift of every later one. Linear
// in the records.
func CheckThread(thread int, got, want []Record) []Finding {
	wantAt, counts := map[string]int{}, map[string]int{}
	for k, w := range want {
		wantAt[occurrence(counts, sameCall(w.CallID))] = k
	}
	var out []Finding
	seen := map[string]int{}
	for _, g := range got {
		key := occurrence(seen, sameCall(g.CallID))
		k, ok := wantAt[key]
		if !ok {
			out = append(out, Finding{Run: runOf(g.CallID), Call: g.CallID, Kind: FindLog,
				Detail: fmt.Sprintf("record %d (%s, %s) is not in the log alone", g.Seq, g.Tool, g.Origin), Duplicate: g.Origin == dedup.Executed})
			continue
		}
		delete(wantAt, key)
		w := want[k]
		gf, wf := servedFrom(got, g), servedFrom(want, w)
		if g.Origin == w.Origin && gf == wf {
			continue
		}
		out = append(out, Finding{Run: runOf(g.CallID), Call: g.CallID, Kind: FindLog,
			Detail:    fmt.Sprintf("record %d %s from %s, alone %s from %s", g.Seq, g.Origin, gf, w.Origin, wf),
			Duplicate: g.Origin == dedup.Executed && w.Origin == dedup.Cached})
	}
	missing := make([]int, 0, len(wantAt))
	for _, k := range wantAt {
		missing = append(missing, k)
	}
	sort.Ints(missing)
	for _, k := range missing {
		w := want[k]
		call := fmt.Sprintf("t%d%s", thread, sameCall(w.CallID))
		out = append(out, Finding{Run: runOf(call), Call: call, Kind: FindLog,
			Detail: fmt.Sprintf("the thread's log lacks the record alone has at %d (%s, %s)", k, w.Tool, w.Origin)})
	}
	return out
}

// occurrence counts call in seen and names its n-th record ("k5-a#1").
func occurrence(seen map[string]int, call string) string {
	seen[call]++
	return fmt.Sprintf("%s#%d", call, seen[call])
}

// servedFrom names the call a served record was served from ("-": none).
func servedFrom(log []Record, r Record) string {
	if r.ServedFrom == nil {
		return "-"
	}
	if *r.ServedFrom < 0 || *r.ServedFrom >= len(log) {
		return fmt.Sprintf("record %d", *r.ServedFrom)
	}
	return sameCall(log[*r.ServedFrom].CallID)
}

// Effects are what the reference threads say about each call of a kind of
// thread (plain or not), by sameCall: how many of its records executed (0:
// served).
type Effects map[bool]map[string]int

// NewEffects indexes the reference logs.
func NewEffects(logs map[bool][]Record) Effects {
	e := Effects{}
	for plain, recs := range logs {
		m := map[string]int{}
		for _, r := range recs {
			if r.Origin == dedup.Executed {
				m[sameCall(r.CallID)]++
			} else if _, ok := m[sameCall(r.CallID)]; !ok {
				m[sameCall(r.CallID)] = 0
			}
		}
		e[plain] = m
	}
	return e
}

// CheckWitnesses compares the services' requests with the reference: a
// served call reaches no service; an executed call reaches its service
// once per execution, and again only with the same key on a later attempt
// (retried). plain says which threads start plainly.
func CheckWitnesses(reqs []witness.Request, ref Effects, plain func(thread int) bool) (findings []Finding, retried int) {
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
		t, _, _, parsed := parseCall(call)
		n, known := ref[parsed && plain(t)][sameCall(call)]
		where := fmt.Sprintf("%s from %s (workflow %s run %s attempt %d)", rs[0].Service, rs[0].Tool, rs[0].Workflow, rs[0].Run, rs[0].Attempt)
		switch {
		case !parsed || !known:
			findings = append(findings, Finding{Run: runOf(call), Call: call, Kind: FindUnknownCall, Detail: where, Duplicate: true})
			continue
		case n == 0:
			findings = append(findings, Finding{Run: runOf(call), Call: call, Kind: FindServedReached,
				Detail: fmt.Sprintf("served alone, reached %s, %d request(s)", where, len(rs)), Duplicate: true})
			continue
		}
		effects, again := countEffects(rs)
		retried += again
		if effects > n {
			findings = append(findings, Finding{Run: runOf(call), Call: call, Kind: FindSecondEffect,
				Detail: fmt.Sprintf("%d effects at %s, alone %d execution(s)", effects, where, n), Duplicate: true})
		}
	}
	return findings, retried
}

// Reached counts the requests that reached the services: by the call that
// sent them, and by the idempotency key they carried.
type Reached struct {
	Calls map[string]int
	Keys  map[string]int
}

// CheckMissing finds the calls a thread's log says executed, of a tool that
// calls a service (serviced), in a run that completed, that no request
// reached. A call whose outcome was unknown and whose run resolved it from
// the service's own record of its key (Unknown's resolution "applied", by
// the tool's check, or "answered", by a person looking the key up) may have
// sent no request of its own: its attempt can be lost before it sent one
// (its worker killed by another call's fault) while an earlier identical
// call of the thread made the effect with the same key. Its witness is a
// request that carried its key. full gives a thin record's full one (which
// holds its Unknown); it is asked only for a record no request of its own
// reached whose key some request carried. byKey counts the calls so
// witnessed.
func CheckMissing(got []Record, reached Reached, serviced map[string]bool, completed func(run string) bool, full func(Record) (*Record, error)) (out []Finding, byKey int) {
	for _, r := range got {
		if r.Origin != dedup.Executed || !serviced[r.Tool] || reached.Calls[r.CallID] > 0 || !completed(runOf(r.CallID)) {
			continue
		}
		detail := r.Tool + " executed, no request reached its service"
		if r.Key != "" && reached.Keys[r.Key] > 0 {
			resolution, err := resolvedBy(r, full)
			switch {
			case err != nil:
				detail += fmt.Sprintf(" (a request carried its key, but its record's resolution cannot be read: %v)", err)
			case resolution == agentrun.ResolvedApplied || resolution == agentrun.ResolvedAnswered:
				byKey++
				continue
			default:
				detail += " (a request carried its key, but its outcome was not resolved from the service's record)"
			}
		}
		out = append(out, Finding{Run: runOf(r.CallID), Call: r.CallID, Kind: FindMissingEffect, Detail: detail})
	}
	return out, byKey
}

// resolvedBy is how r's unknown outcome was resolved ("" when it was not
// unknown), from r or, when r is thin, from its full record.
func resolvedBy(r Record, full func(Record) (*Record, error)) (string, error) {
	if r.Thin() {
		f, err := full(r)
		if err != nil {
			return "", err
		}
		r = *f
	}
	if r.Unknown == nil {
		return "", nil
	}
	return r.Unknown.Resolution, nil
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

// threadLog is the execution log the thread's newest run holds (raw: thin
// records stay thin; origins, served-from and call ids are all there) or,
// when every run of the thread was deleted (history_delete), the one its
// thread store holds (nil: none).
func threadLog(ctx context.Context, c client.Client, threadID string, store threadstate.Checkpointer) ([]Record, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, threadID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && store != nil {
		return storedLog(ctx, store, threadID)
	}
	if err != nil {
		return nil, fmt.Errorf("soak: thread %s: %w", threadID, err)
	}
	recs, err := queryLog(ctx, c, threadID, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	if err != nil {
		return nil, fmt.Errorf("soak: thread %s's log: %w", threadID, err)
	}
	return recs, nil
}

// queryLog is the execution log run runID of workflow workflowID holds
// (the tulip.log query).
func queryLog(ctx context.Context, c client.Client, workflowID, runID string) ([]Record, error) {
	v, err := c.QueryWorkflow(ctx, workflowID, runID, agentrun.QueryLog)
	if err != nil {
		return nil, err
	}
	var recs []Record
	if err := v.Get(&recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// heldRecord is thin record r in full: the record of its call in the log
// of the run that holds it (Record.HeldBy).
func heldRecord(ctx context.Context, c client.Client, threadID string, r Record) (*Record, error) {
	recs, err := queryLog(ctx, c, threadID, r.HeldBy())
	if err != nil {
		return nil, fmt.Errorf("run %s's log: %w", r.HeldBy(), err)
	}
	for i := range recs {
		if recs[i].CallID == r.CallID && recs[i].Seq == r.Seq && !recs[i].Thin() {
			return &recs[i], nil
		}
	}
	return nil, fmt.Errorf("run %s's log holds no full record of call %s", r.HeldBy(), r.CallID)
}

// replayer replays histories from memory with one reused replayer.
type replayer struct {
	r      sdkworker.WorkflowReplayer
	logger sdklog.Logger
}

func newReplayer(opts workerplugin.Options, ro sdkworker.WorkflowReplayerOptions) (*replayer, error) {
	plugin, err := workerplugin.NewPlugin(opts)
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
// memory at a time, each with the replayer pick gives it, and returns how
// many it replayed. It stops at a run that history_delete deleted.
func replayChain(ctx context.Context, c client.Client, workflowID, runID string, deleted map[string]bool, pick func(runID string, hist *historypb.History) *replayer) (int, error) {
	n := 0
	for runID != "" && !deleted[runID] {
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		hist := &historypb.History{}
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return n, fmt.Errorf("history of %s: %w", runID, err)
			}
			hist.Events = append(hist.Events, ev)
		}
		rp := pick(runID, hist)
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

// storedLog is the default agent's log in the thread store's state.
func storedLog(ctx context.Context, store threadstate.Checkpointer, threadID string) ([]Record, error) {
	cp, err := store.Load(ctx, threadstate.ThreadRef{ThreadID: threadID})
	if err != nil {
		return nil, fmt.Errorf("soak: thread %s: every run deleted, and its thread store: %w", threadID, err)
	}
	if cp == nil {
		return nil, fmt.Errorf("soak: thread %s: every run deleted, and the thread store has no state for it", threadID)
	}
	l, err := dedup.Restore(cp.Agents[agentrun.DefaultAgent])
	if err != nil {
		return nil, fmt.Errorf("soak: thread %s: the stored log: %w", threadID, err)
	}
	return l.Records(), nil
}
