package agentrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Client tools (RunInput.ClientTools) are tools the caller runs. A call of
// one goes through the decision order as any call (reject, before-hooks,
// cancel, interrupt, match); one the log does not serve is held for the
// caller instead of executed: the response's other calls run (or are
// served) first, then the run waits on an interrupt of ClientToolsHook
// whose resume carries each held call's result (ResumeInput.Results).
// The results are recorded as the calls' outcomes (executed records: an
// identical later call of an idempotent client tool is served from them,
// in this run and the thread's later runs) and are the tool messages the
// model reads. Such a resume is no person's answer: the run keeps
// matching after it (Resumed stays as it was) and its phase does not
// change. Only runs with client tools take these paths.

// ClientToolsReason is the Reason of a ClientToolsHook interrupt.
const ClientToolsReason = "waiting for the client's tool results"

// ClientTag is the tool tag of a client tool's call in metrics: the names
// are the caller's, and a tag's values must be bounded.
const ClientTag = "client"

// clientHold is a client tool's call held for the caller.
type clientHold struct {
	call     threadstate.ToolCall
	args     *dedup.Args // post-hook
	pre      *dedup.Args // as the model sent them, when a hook rewrote them
	response int
	mode     calllog.Mode // Matched or Recorded; Unrecorded: a held call a resume performs
	spec     protocol.ToolSpec
}

// shown is the held call as the caller gets it: the model's call, with
// the arguments a before-hook rewrote it to, if one did.
func (h *clientHold) shown() threadstate.ToolCall {
	c := h.call
	if h.pre != nil {
		c.Arguments = h.args.Text()
	}
	return c
}

// setClientTools takes the run's client tools, or refuses them: a name
// that is not a tool name, given twice, or that a worker tool has.
func (r *run) setClientTools() error {
	if len(r.in.ClientTools) == 0 {
		return nil
	}
	r.client = make(map[string]*activities.Tool, len(r.in.ClientTools))
	r.clientSpecs = make([]protocol.ToolSpec, 0, len(r.in.ClientTools))
	for _, s := range r.in.ClientTools {
		if _, err := activities.NewToolNames(s.Name); err != nil {
			return badInput(fmt.Sprintf("client tool %q: names are 1-64 letters, digits, '_' or '-'", s.Name))
		}
		if _, ok := r.client[s.Name]; ok {
			return badInput(fmt.Sprintf("client tool %q is given twice", s.Name))
		}
		if err := r.clientClash(s.Name); err != nil {
			return err
		}
		spec := protocol.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters, Idempotent: s.Idempotent}
		r.client[s.Name] = activities.ToolFromSpec(spec)
		r.clientSpecs = append(r.clientSpecs, spec)
	}
	return nil
}

// clientClash refuses a client tool named as a tool of the worker.
func (r *run) clientClash(name string) error {
	if t, ok := r.tools[name]; ok {
		owner := "a tool of the worker"
		if ts := t.Spec().Toolset; ts != "" {
			owner = fmt.Sprintf("a tool of the worker's toolset %q", ts)
		}
		return badInput(fmt.Sprintf("client tool %q has the name of %s: rename it", name, owner))
	}
	return nil
}

// checkClientToolsets refuses a client tool named as one of the toolsets'
// tools the run just read.
func (r *run) checkClientToolsets() error {
	for _, s := range r.clientSpecs {
		if err := r.clientClash(s.Name); err != nil {
			return err
		}
	}
	return nil
}

// clientNames are the client tools' names, in order (nil: none).
func (r *run) clientNames() []string {
	if len(r.clientSpecs) == 0 {
		return nil
	}
	names := make([]string, len(r.clientSpecs))
	for i, s := range r.clientSpecs {
		names[i] = s.Name
	}
	return names
}

// isClient reports whether tool is one of the run's client tools.
func (r *run) isClient(tool *activities.Tool) bool {
	return r.client != nil && tool != nil && r.client[tool.Spec().Name] == tool
}

// clientCall serves a client tool's call from the log when a record
// matches (its step, settled as any served call), or holds it for the
// caller (nil).
func (r *run) clientCall(ctx wf.Context, tool *activities.Tool, call threadstate.ToolCall, args, pre *dedup.Args, response int, mode calllog.Mode) *step {
	spec := tool.Spec()
	st := &step{started: calllog.Call{Tool: spec.Name, CallID: call.ID, Args: args, Response: response, Turn: r.turn, Run: r.runID, Mode: mode}}
	c := &st.started
	if f := r.calls.Serve(ctx, c); f != nil {
		seq := c.ServedFrom.Seq
		st.line = TraceLine{Turn: r.turn, CallID: call.ID, Tool: spec.Name, Arguments: json.RawMessage(args.Text()), Outcome: OutcomeCached,
			ServedFrom: &seq, Relation: c.Relation, Key: c.ServedFrom.Key}
		st.call, st.future = c, f
		return st
	}
	r.holdClient(call, args, pre, response, mode, spec)
	return nil
}

func (r *run) holdClient(call threadstate.ToolCall, args, pre *dedup.Args, response int, mode calllog.Mode, spec protocol.ToolSpec) {
	r.clientHeld = append(r.clientHeld, clientHold{call: call, args: args, pre: pre, response: response, mode: mode, spec: spec})
}

// awaitClient holds the response's client calls for the caller (an
// interrupt of ClientToolsHook), waits for their results, and records
// them and adds them to the conversation.
func (r *run) awaitClient(ctx wf.Context) error {
	held := r.clientHeld
	r.clientHeld = nil
	calls := make([]threadstate.ToolCall, len(held))
	for i := range held {
		calls[i] = held[i].shown()
	}
	if err := r.awaitNoInterrupt(ctx); err != nil {
		return err
	}
	r.interrupts++
	r.interrupt = &Interrupt{ID: fmt.Sprintf("int-%d", r.interrupts), Turn: r.turn, Hook: ClientToolsHook, Reason: ClientToolsReason, Held: calls}
	for i := range held {
		h := &held[i]
		r.appendLine(ctx, TraceLine{Turn: r.turn, CallID: h.call.ID, Tool: h.call.Name, Arguments: json.RawMessage(h.args.Text()), Outcome: OutcomeHeld}, -1)
	}
	wait := time.Duration(r.in.ClientTimeoutMillis) * time.Millisecond
	resume, err := r.waitResumeUnless(ctx, ClientToolsHook, nil, wait)
	if err != nil {
		return err
	}
	if resume.expired {
		// Nobody answered in time: each held call is answered as not
		// performed, as a declined one is, and never recorded.
		msg := fmt.Sprintf("not performed: the client did not return the result within %s", wait)
		for i := range held {
			h := &held[i]
			line := TraceLine{Turn: r.turn, CallID: h.call.ID, Tool: h.call.Name, Arguments: json.RawMessage(h.args.Text()), Outcome: OutcomeDropped, Error: errText(msg)}
			r.addTrace(ctx, line, toolMessage(line.CallID, nil, line.Error, false))
		}
		r.showDetails(ctx)
		return nil
	}
	results := make(map[string]ToolResult, len(resume.Results))
	for _, res := range resume.Results {
		results[res.CallID] = res
	}
	for i := range held {
		h := &held[i]
		result, terr := clientOutcome(results[h.call.ID])
		line := TraceLine{Turn: r.turn, CallID: h.call.ID, Tool: h.call.Name, Arguments: json.RawMessage(h.args.Text()), Outcome: OutcomeExecuted}
		if h.mode == calllog.Unrecorded {
			line.Outcome = OutcomeDangling // performed by a resume: never recorded
		} else {
			c := calllog.Call{Tool: h.call.Name, CallID: h.call.ID, Args: h.args, Response: h.response, Turn: r.turn, Run: r.runID, Mode: h.mode}
			r.calls.Complete(&c, result, terr)
			if r.stateByRef {
				line.NearMiss = c.Explain(h.pre, h.spec.Idempotent, h.mode == calllog.Matched)
			}
		}
		if terr != nil {
			line.Error = errText(terr.Message)
		} else {
			line.Result = result
		}
		r.addTrace(ctx, line, toolMessage(line.CallID, line.Result, line.Error, false))
	}
	r.showDetails(ctx)
	return nil
}

// clientOutcome is a client tool's result as the log records it: Output
// as JSON when it is JSON (compacted), else as a JSON string; or, marked
// IsError, an error of type protocol.ErrClientTool with Output as its
// message.
func clientOutcome(res ToolResult) (json.RawMessage, *dedup.ToolError) {
	if res.IsError {
		return nil, calllog.ToolErrorOf(temporal.NewNonRetryableApplicationError(res.Output, protocol.ErrClientTool, nil))
	}
	if t := bytes.TrimSpace([]byte(res.Output)); len(t) > 0 && json.Valid(t) {
		var b bytes.Buffer
		if json.Compact(&b, t) == nil {
			return b.Bytes(), nil
		}
	}
	b, _ := json.Marshal(res.Output)
	return b, nil
}

// checkResults checks a resume's Results against the open interrupt: a
// ClientToolsHook interrupt takes a result for each held call and nothing
// else; any other takes none.
func (r *run) checkResults(in ResumeInput) error {
	it := r.interrupt
	if it.Hook == UnknownHook {
		// Run it again (perform_dangling), say what happened (one
		// result), or neither (it stays unknown).
		held := it.Held[0].ID
		switch {
		case in.PerformDangling && !r.holdRerun:
			return badInput(fmt.Sprintf("interrupt %q holds call %s, whose executions are used (RetryPolicy.MaximumAttempts): resume it with a result (what happened) or decline it", it.ID, held))
		case len(in.Results) == 0:
		case in.PerformDangling:
			return badInput(fmt.Sprintf("interrupt %q holds call %s, whose outcome is unknown: resume it with perform_dangling (run it again) or a result (what happened), not both", it.ID, held))
		case len(in.Results) > 1 || in.Results[0].CallID != held:
			return badInput(fmt.Sprintf("interrupt %q holds call %s, whose outcome is unknown: give one result, for call_id %q", it.ID, held, held))
		}
		return nil
	}
	if it.Hook != ClientToolsHook {
		if len(in.Results) > 0 {
			return badInput(fmt.Sprintf("interrupt %q (hook %s) holds no client tool calls: answer it without results", it.ID, it.Hook))
		}
		return nil
	}
	var ids []string
	held := make(map[string]bool, len(it.Held))
	for _, c := range it.Held {
		if !held[c.ID] {
			ids = append(ids, c.ID)
		}
		held[c.ID] = true
	}
	holds := fmt.Sprintf("interrupt %q waits for the client's results of calls %s", it.ID, strings.Join(ids, ", "))
	if len(in.Results) == 0 {
		return badInput(holds + ": resume it with results (an answer or perform_dangling does not run them)")
	}
	if in.Answer != "" || in.PerformDangling {
		return badInput(holds + ": resume it with results only, no answer or perform_dangling")
	}
	seen := make(map[string]bool, len(in.Results))
	for _, res := range in.Results {
		switch {
		case !held[res.CallID]:
			return badInput(fmt.Sprintf("%s: call_id %q is not one of them", holds, res.CallID))
		case seen[res.CallID]:
			return badInput(fmt.Sprintf("%s: call_id %q has two results", holds, res.CallID))
		}
		seen[res.CallID] = true
	}
	if i := slices.IndexFunc(ids, func(id string) bool { return !seen[id] }); i >= 0 {
		return badInput(fmt.Sprintf("%s: no result for call_id %q", holds, ids[i]))
	}
	return nil
}
