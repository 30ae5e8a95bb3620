package agent

import (
	"encoding/json"
	"errors"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// The package's types are its own (go doc shows their fields); the
// internal client's carry the same JSON, so a value crosses by its JSON:
// the wire form both sides already agree on (docs/protocol.md).
func recode[T any](from any) (T, error) {
	var to T
	b, err := json.Marshal(from)
	if err != nil {
		return to, err
	}
	return to, json.Unmarshal(b, &to)
}

// result is res as this package's Result (nil for nil). Field by field:
// a result is read once per Await, and its trace can be long.
func result(res *agentrun.RunResult) (*Result, error) {
	if res == nil {
		return nil, nil
	}
	out := &Result{Status: Status(res.Status), Agent: res.Agent, ThreadID: res.ThreadID, Answer: res.Answer,
		Turns: res.Turns, Error: res.Error, Checkpoint: state(res.Checkpoint), ContinuedAsNew: res.ContinuedAsNew,
		State: state(res.State), Usage: (*tulip.Usage)(res.Usage), ThreadUsage: (*tulip.Usage)(res.ThreadUsage), ClientTools: res.ClientTools, StoreError: res.StoreError}
	for _, c := range res.Compactions {
		out.Compactions = append(out.Compactions, Compaction{Turn: c.Turn, Upto: c.Upto, Replaced: c.Replaced, Estimate: c.Estimate,
			Budget: c.Budget, TooLong: c.TooLong, Usage: (*tulip.Usage)(c.Usage)})
	}
	if res.Trace != nil {
		out.Trace = make([]TraceLine, len(res.Trace))
	}
	for i, l := range res.Trace {
		out.Trace[i] = TraceLine{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Arguments: l.Arguments,
			Outcome: Outcome(l.Outcome), Result: l.Result, Error: l.Error, ServedFrom: l.ServedFrom,
			Relation: string(l.Relation), Key: l.Key}
		if u := l.Unknown; u != nil {
			out.Trace[i].Unknown = &Unknown{Cause: u.Cause, Checks: u.Checks, Retries: u.Retries, Holds: u.Holds, Resolution: u.Resolution}
		}
		if l.NearMiss != nil {
			nm, err := recode[NearMiss](l.NearMiss)
			if err != nil {
				return nil, err
			}
			out.Trace[i].NearMiss = &nm
		}
	}
	if in := res.Interrupt; in != nil {
		out.Interrupt = &Interrupt{ID: in.ID, Turn: in.Turn, Hook: in.Hook, Reason: in.Reason, Agent: in.Agent}
		if in.Held != nil {
			out.Interrupt.Held = make([]tulip.ToolCall, len(in.Held))
			for i, c := range in.Held {
				out.Interrupt.Held[i] = tulip.ToolCall(c)
			}
		}
	}
	if res.Summary != nil {
		out.Summary = make(map[Outcome]int, len(res.Summary))
		for k, n := range res.Summary {
			out.Summary[Outcome(k)] = n
		}
	}
	return out, nil
}

// publicError is err with the internal client's typed errors as this
// package's.
func publicError(err error) error {
	var busy *runclient.ThreadBusyError
	var closed *runclient.NotInterruptedError
	var failed *runclient.RunFailedError
	var nd *runclient.NondeterminismError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &busy):
		return &ThreadBusyError{ThreadID: busy.ThreadID, RunID: busy.RunID}
	case errors.As(err, &closed):
		return &NotInterruptedError{WorkflowID: closed.WorkflowID}
	case errors.As(err, &nd):
		return &NondeterminismError{WorkflowID: nd.Handle.WorkflowID, RunID: nd.Handle.RunID, EventID: nd.EventID, Message: nd.Message}
	case errors.As(err, &failed):
		res, rerr := result(failed.Result)
		if rerr != nil {
			return rerr
		}
		return &RunFailedError{Result: res, Err: failed.Err, msg: failed.Error()}
	}
	return err
}

func (e *ThreadBusyError) err() error {
	return &runclient.ThreadBusyError{ThreadID: e.ThreadID, RunID: e.RunID}
}

func (e *NondeterminismError) err() error {
	return &runclient.NondeterminismError{Handle: runclient.Handle{WorkflowID: e.WorkflowID, RunID: e.RunID}, EventID: e.EventID, Message: e.Message}
}

func (e *NotInterruptedError) err() error {
	return &runclient.NotInterruptedError{WorkflowID: e.WorkflowID}
}

// state is cp as a *tulip.ThreadState (nil for nil).
func state(cp *threadstate.Checkpoint) *tulip.ThreadState {
	if cp == nil {
		return nil
	}
	return threadstate.PublicState(cp).(*tulip.ThreadState)
}
