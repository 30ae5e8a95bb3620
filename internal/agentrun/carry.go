package agentrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// segBound is where a segment ends: counts of messages, this agent's
// records, and trace lines.
type segBound struct{ msgs, recs, trace int }

// continueAsNew hands the run's state to a new workflow run, between
// responses (nothing is executing or held). Segments received are passed on
// as they came; what this run added is one new segment.
func (r *run) continueAsNew(ctx wf.Context) error {
	r.drainSignals(ctx)
	if err := r.closeStream(ctx, false); err != nil { // before waiting for handlers: open polls answer now
		return err
	}
	if err := wf.Await(ctx, func() bool { return wf.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	if r.stateByRef {
		return r.continueByRef(ctx)
	}
	refs := newConvRefs(r.messages)
	recs := r.log.Records()
	segs, bounds := r.segs, r.bounds
	end := segBound{len(r.messages), len(recs), len(r.trace)}
	prev := segBound{}
	if len(bounds) > 0 {
		prev = bounds[len(bounds)-1]
	}
	if end != prev || len(bounds) == 0 {
		b, err := r.encodeSegment(refs, recs, prev, end, len(bounds) == 0)
		if err != nil {
			return err
		}
		segs, bounds = append(slices.Clone(segs), b), append(slices.Clone(bounds), end)
	}
	if len(segs) > MaxSegments { // merge the two oldest
		b, err := r.encodeSegment(refs, recs, segBound{}, bounds[1], true)
		if err != nil {
			return err
		}
		segs = append([][]byte{b}, segs[2:]...)
		bounds = bounds[1:]
	}
	c := &Carry{Hooks: r.hooks, Turn: r.turn, Phase: r.phase, PhaseTurn: r.phaseTurn, Resumed: r.resumed,
		Interrupts: r.interrupts, Answered: slices.Sorted(maps.Keys(r.answered)), Executions: r.executions,
		BaseLen: r.baseLen, Responses: r.log.Response(), Sent: r.sentCursor(), Digest: r.convDigest(), Segments: len(segs), Continued: r.continued + 1, Usage: r.usage}
	next := r.in
	next.Hooks, next.Message, next.PreviousRunID, next.Continued = nil, "", "", c
	args := []any{next}
	for i, seg := range segs {
		if err := r.checkSize(ctx, fmt.Sprintf("continue-as-new segment %d", i+1), seg); err != nil {
			return err
		}
		args = append(args, seg)
	}
	if err := r.checkSize(ctx, "the continue-as-new state", next); err != nil {
		return err
	}
	size := 0
	for _, seg := range segs {
		size += len(seg)
	}
	r.count(ctx, "continue-as-new", MetricContinuedAsNew, 1)
	r.gauge(ctx, "continue-as-new-bytes", MetricStateBytes, size, "continue_as_new")
	return wf.NewContinueAsNewError(ctx, WorkflowName, args...)
}

// encodeSegment encodes what lies between two bounds; the first segment
// also holds the other agents' logs.
func (r *run) encodeSegment(refs convRefs, recs []dedup.Record, from, to segBound, first bool) ([]byte, error) {
	seg := Segment{Messages: r.messages[from.msgs:to.msgs], Records: []CarriedRecord{}, Trace: []CarriedLine{}}
	if seg.Messages == nil {
		seg.Messages = []threadstate.Message{}
	}
	if first && r.loaded != nil {
		seg.Agents = maps.Clone(r.loaded.Agents)
		delete(seg.Agents, r.in.Agent)
	}
	for _, rec := range recs[from.recs:to.recs] {
		cr := CarriedRecord{Record: rec}
		if refs.args(rec.CallID, rec.Arguments) {
			cr.Arguments, cr.ArgsRef = "", true
		}
		if refs.result(rec.CallID, rec.Result) {
			cr.Result, cr.ResultRef = nil, true
		}
		seg.Records = append(seg.Records, cr)
	}
	for _, l := range r.trace[from.trace:to.trace] {
		cl := CarriedLine{TraceLine: l}
		if l.Arguments != nil && refs.args(l.CallID, string(l.Arguments)) {
			cl.Arguments, cl.ArgsRef = nil, true
		}
		if refs.result(l.CallID, l.Result) {
			cl.Result, cl.ResultRef = nil, true
		}
		seg.Trace = append(seg.Trace, cl)
	}
	b, err := json.Marshal(seg)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("continue-as-new: "+err.Error(), protocol.ErrCheckpoint, nil)
	}
	return b, nil
}

// restore takes the state a continued run was handed: its counters and
// its segments (written by continueAsNew, decoded as they are).
func (r *run) restore(c *Carry, raw [][]byte) error {
	bad := func(msg string) error {
		return temporal.NewNonRetryableApplicationError("continued state: "+msg, protocol.ErrBadInput, nil)
	}
	if c.Segments != len(raw) {
		return bad(fmt.Sprintf("%d segments announced, %d received", c.Segments, len(raw)))
	}
	segs := make([]Segment, len(raw))
	agents := map[string]json.RawMessage{}
	var msgs []threadstate.Message
	for i, b := range raw {
		if err := json.Unmarshal(b, &segs[i]); err != nil {
			return bad(fmt.Sprintf("segment %d: %v", i+1, err))
		}
		maps.Copy(agents, segs[i].Agents)
		msgs = append(msgs, segs[i].Messages...)
	}
	refs := newConvRefs(msgs)
	var recs []dedup.Record
	var trace []TraceLine
	bound := segBound{}
	for _, seg := range segs {
		for _, cr := range seg.Records {
			rec := cr.Record
			if cr.ArgsRef {
				rec.Arguments = refs.callArgs[rec.CallID]
			}
			if cr.ResultRef {
				rec.Result = json.RawMessage(refs.toolOut[rec.CallID])
			}
			recs = append(recs, rec)
		}
		for _, cl := range seg.Trace {
			l := cl.TraceLine
			if cl.ArgsRef {
				l.Arguments = json.RawMessage(refs.callArgs[l.CallID])
			}
			if cl.ResultRef {
				l.Result = json.RawMessage(refs.toolOut[l.CallID])
			}
			trace = append(trace, l)
		}
		bound = segBound{bound.msgs + len(seg.Messages), bound.recs + len(seg.Records), bound.trace + len(seg.Trace)}
		r.bounds = append(r.bounds, bound)
	}
	r.segs = raw
	l, err := dedup.FromRecords(c.Responses, recs)
	if err != nil {
		return bad(err.Error())
	}
	r.calls.Load(l)
	r.log = l
	r.loaded = &threadstate.Checkpoint{Agents: agents}
	r.messages, r.digest, r.undigested = msgs, c.Digest, 0
	r.hooks = nil
	if err := r.changeHooks(HooksInput{Install: c.Hooks}); err != nil {
		return err
	}
	r.turn, r.phase, r.phaseTurn, r.resumed = c.Turn, c.Phase, c.PhaseTurn, c.Resumed
	r.interrupts, r.executions, r.baseLen = c.Interrupts, c.Executions, c.BaseLen
	r.setSent(c.Sent)
	r.continued, r.trace = c.Continued, trace
	r.usage = c.Usage
	r.traceMsg = make([]int, len(trace))
	for i := range r.traceMsg {
		r.traceMsg[i] = -1
	}
	for _, id := range c.Answered {
		r.answered[id] = true
	}
	if r.sent.Count > len(r.messages) {
		return bad("the model cursor is past the conversation")
	}
	return nil
}

// convRefs indexes the conversation by call id: the first call with an id
// (its argument text) and the first tool message answering it (its
// content). A carried value equal to these is left out and read back from
// them: the same maps on both sides make it exact.
type convRefs struct {
	callArgs map[string]string
	toolOut  map[string]string
}

func newConvRefs(msgs []threadstate.Message) convRefs {
	c := convRefs{callArgs: map[string]string{}, toolOut: map[string]string{}}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			if _, ok := c.callArgs[tc.ID]; !ok {
				c.callArgs[tc.ID] = tc.Arguments
			}
		}
		if m.Role == "tool" {
			if _, ok := c.toolOut[m.ToolCallID]; !ok {
				c.toolOut[m.ToolCallID] = m.Content
			}
		}
	}
	return c
}

func (c convRefs) args(id, text string) bool {
	a, ok := c.callArgs[id]
	return ok && text != "" && a == text
}

func (c convRefs) result(id string, res json.RawMessage) bool {
	out, ok := c.toolOut[id]
	return ok && len(res) > 0 && bytes.Equal([]byte(out), res)
}
