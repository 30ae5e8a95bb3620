package agentrun

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// ForkHook names, in an Interrupt, a call a fork holds: its origin thread
// never made it after the fork's point, and the fork is not live
// (docs/forks.md). Approving it (PerformDangling) runs it.
const ForkHook = "tulip.fork"

// ForkInput makes a run a fork of another thread (its origin): the run
// starts from State (the origin's conversation and log before model
// response At), and a call equal to one the origin made from response At
// on (Origin) is served from that record, once, with no body run: its
// trace line is cached with relation "origin". A call the origin never
// made is held (an interrupt of ForkHook), unless Live.
type ForkInput struct {
	// Thread is the origin thread; At the model response (1-based) the
	// fork starts at.
	Thread string `json:"thread"`
	At     int    `json:"at"`
	// State is the fork's thread state at its start, in full (its first
	// run only: a later run on the fork's thread loads its thread).
	State *threadstate.Checkpoint `json:"state,omitempty"`
	// Origin is the origin agent's log from response At on (a dedup
	// snapshot of full records).
	Origin json.RawMessage `json:"origin,omitempty"`
	// Used lists the Origin records (their Seq) that already served a
	// call of the fork: by an earlier run of the chain, or of the fork's
	// thread.
	Used []int `json:"used,omitempty"`
	// Live runs the calls the origin never made.
	Live bool `json:"live,omitempty"`
}

// forkOrigin is the origin's records a fork serves from, each at most
// once.
type forkOrigin struct {
	in   *ForkInput
	recs []dedup.Record
	used map[int]bool
}

// setUpFork reads the run's ForkInput: the fork's first run adopts its
// starting state (the thread is new: nothing was loaded), and every run
// of the fork serves from the origin's records.
func (r *run) setUpFork() error {
	f := r.in.Fork
	if f == nil {
		if fo := r.forkOf; fo != nil && !fo.Live {
			// A later run on a fork's thread (its state names the
			// origin): it serves from nothing of the origin's, and holds
			// what its own log does not serve, as the fork did. A fork
			// touches nothing real unless a person approves or it is live.
			r.origin = &forkOrigin{in: &ForkInput{Thread: fo.Thread, At: fo.At}, used: map[int]bool{}}
		}
		return nil
	}
	if r.in.ThreadID == "" || f.Thread == "" || f.At < 1 {
		return badInput("a fork needs its thread, its origin thread and a response number from 1")
	}
	if !r.stateByRef {
		return badInput("a fork needs a worker that keeps thread state by reference")
	}
	if f.State != nil {
		if r.in.Continued == nil {
			if !r.in.NewThread {
				return badInput(fmt.Sprintf("thread %s has runs already: a fork starts a new thread", r.in.ThreadID))
			}
			if err := r.adopt(f.State); err != nil {
				return err
			}
			r.baseLen = r.log.Len()
		}
		f.State = nil // held by this run now (its result names it); no continuation carries it
	}
	r.forkOf = &threadstate.ForkOf{Thread: f.Thread, At: f.At, Live: f.Live}
	o := &forkOrigin{in: f, used: map[int]bool{}}
	if len(f.Origin) > 0 {
		l, err := dedup.Restore(f.Origin)
		if err != nil {
			return badInput(fmt.Sprintf("fork of %s: its origin log: %v", f.Thread, err))
		}
		o.recs = l.Records()
	}
	for _, seq := range f.Used {
		o.used[seq] = true
	}
	r.origin = o
	return nil
}

// find is the earliest origin record from the fork's point on, not used
// yet, that a call of tool with args equals (by the value model, or by
// hash for a thin record), or nil. Executed and served records both
// count: the origin made the call either way (a fork of a fork serves
// what its origin served).
func (o *forkOrigin) find(tool string, args *dedup.Args) *dedup.Record {
	for i := range o.recs {
		rec := &o.recs[i]
		if rec.Response >= o.in.At && rec.Origin != dedup.Cancelled && !o.used[rec.Seq] && rec.SameCall(tool, args) {
			return rec
		}
	}
	return nil
}

// usedSeqs lists the origin records used so far, in order.
func (o *forkOrigin) usedSeqs() []int {
	out := make([]int, 0, len(o.used))
	for seq := range o.used {
		out = append(out, seq)
	}
	slices.Sort(out)
	return out
}

// carried is the fork's input for the chain's next run.
func (o *forkOrigin) carried() *ForkInput {
	next := *o.in
	next.State, next.Used = nil, o.usedSeqs()
	return &next
}

// holdsNew reports whether a fork holds this call: the fork is not live,
// the origin never made it (fromOrigin: an unused record equals it), and
// the fork's own log would not serve it.
func (r *run) holdsNew(tool *activities.Tool, args *dedup.Args, response int, mode calllog.Mode, fromOrigin bool) (*hold, bool) {
	if r.origin == nil || r.origin.in.Live || r.isClient(tool) || fromOrigin {
		return nil, false
	}
	spec := tool.Spec()
	if mode == calllog.Matched {
		if rec, _ := r.log.FindMatchingExecution(spec.Name, args, response); rec != nil {
			return nil, false
		}
	}
	reason := "new call: thread " + r.origin.in.Thread + " never made it from response " + strconv.Itoa(r.origin.in.At) +
		" on; approve to run it for real"
	if len(r.origin.recs) == 0 && r.in.Fork == nil {
		reason = "new call on a fork of thread " + r.origin.in.Thread + " (not live): approve to run it for real"
	}
	return &hold{hook: ForkHook, reason: reason, model: args, post: args}, true
}

// serveOrigin serves a fork's call from the origin's record equal to it,
// if one is left (and the fork's own log does not serve it: mode Matched
// and a match). It returns the call's step, or nil.
func (r *run) serveOrigin(ctx wf.Context, c *calllog.Call, spec protocol.ToolSpec) *step {
	if r.origin == nil {
		return nil
	}
	if c.Mode == calllog.Matched {
		if rec, _ := r.log.FindMatchingExecution(spec.Name, c.Args, c.Response); rec != nil {
			return nil
		}
	}
	rec := r.origin.find(spec.Name, c.Args)
	if rec == nil {
		return nil
	}
	r.origin.used[rec.Seq] = true
	st := &step{started: *c}
	st.call = &st.started
	st.future = r.calls.ServeOrigin(ctx, st.call, rec)
	seq := rec.Seq
	st.line = TraceLine{Turn: r.turn, CallID: c.CallID, Tool: spec.Name, Arguments: json.RawMessage(c.Args.Text()), Outcome: OutcomeCached,
		ServedFrom: &seq, Relation: dedup.FromOrigin, Key: rec.Key}
	return st
}

// keepPerformedCall keeps a held call a resume performed (it ran outside
// the log, by the contract), for a fork of the thread to serve: its tool
// message is the next message of the conversation.
func (r *run) keepPerformedCall(c *calllog.Call, err error) {
	p := threadstate.PerformedCall{Response: c.Response, CallID: c.CallID, Tool: c.Tool, Arguments: c.Args.Text(), Message: r.convLen(), Key: c.Key}
	if err != nil {
		p.Error = calllog.ToolErrorOf(err)
	}
	r.performed = append(r.performed, p)
}

// performedState is the thread state's Performed: the other agents' as
// loaded, and this agent's.
func (r *run) performedState() map[string][]threadstate.PerformedCall {
	var out map[string][]threadstate.PerformedCall
	if r.loaded != nil && len(r.loaded.Performed) > 0 {
		out = maps.Clone(r.loaded.Performed)
	}
	if len(r.performed) > 0 {
		if out == nil {
			out = map[string][]threadstate.PerformedCall{}
		}
		out[r.in.Agent] = r.performed
	}
	return out
}

// madeByOrigin reports, for a hook's interrupt, whether the call is one
// the fork's origin made (an unused origin record equals it): the hook
// does not ask about it, as tulip.approval does not (docs/forks.md). Runs
// recorded before "tulip-fork-hook-origin" asked.
func (r *run) madeByOrigin(ctx wf.Context, tool string, args *dedup.Args) bool {
	if r.origin == nil || r.origin.find(tool, args) == nil {
		return false
	}
	return r.version(ctx, "tulip-fork-hook-origin") == 1
}
