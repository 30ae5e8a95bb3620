package agentrun

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/converter"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// step is one call of the current response: settled already (rejected,
// cancelled), or executing (or served) through the run's call log.
type step struct {
	line   TraceLine
	msg    threadstate.Message
	call   *calllog.Call
	future wf.Future
	// started holds the call of a step that launch made (call points at
	// it): one allocation a call, not two.
	started calllog.Call
	// direct: the future settles with a ToolOutput value, not an
	// activity's payload (a sub-agent's call).
	direct bool
	// child, on a sub-agent's call, is the sub-agent's run: its path and
	// its settled calls, published before this call's line.
	child *childRun
}

// enqueue settles st at once when calls run one after another, and keeps
// it for finish when they run at once.
func (r *run) enqueue(ctx wf.Context, steps []*step, st *step) []*step {
	if r.parallelCalls {
		return append(steps, st)
	}
	r.finish(ctx, []*step{st})
	return steps
}

// finish settles steps in call order and adds their trace lines and tool
// messages in that order.
func (r *run) finish(ctx wf.Context, steps []*step) {
	for _, st := range steps {
		if st.call != nil {
			// What Get decodes into escapes: out itself is a copy, so
			// that a call allocates one.
			var out activities.ToolOutput
			var err error
			if st.call.Served() || st.direct {
				p := new(activities.ToolOutput)
				err = st.future.Get(ctx, p) // the record's output (or, still running, its call's)
				out = *p
			} else {
				// The activity's payload, read by a scan when it is JSON
				// (the converter's codec applied), else decoded by the
				// data converter: a settled future decodes again.
				raw := new(converter.RawValue)
				err = st.future.Get(ctx, raw)
				var read bool
				if err == nil {
					out, read = activities.ReadToolOutput(raw.Payload())
				}
				if !read {
					wire := new(activities.ToolOutputJSON)
					err = st.future.Get(ctx, wire)
					out = activities.ToolOutput(*wire)
				}
			}
			if st.line.Unknown != nil {
				st.call.NoteUnknown(st.line.Unknown)
			}
			st.call.Settle(&out, err)
			if r.keepPerformed && st.line.Outcome == OutcomeDangling {
				r.keepPerformedCall(st.call, err)
			}
			if err != nil {
				st.line.Error = errText(calllog.ToolErrorOf(err).Message)
			} else {
				st.line.Result, st.line.ResultIn = out.Result, out.ResultIn
			}
			st.msg = toolMessage(st.line.CallID, st.line.Result, st.line.Error, st.call.Served())
			if st.line.ResultIn != nil {
				// Served from a record another run holds: the message
				// names the message whose content it is.
				st.msg.Content, st.msg.ContentIn = "", st.line.ResultIn
			}
		}
		if st.child != nil {
			r.publishChild(st.child.path, st.child.lines)
			st.child.lines = nil
		}
		r.addTrace(ctx, st.line, st.msg)
	}
	r.showDetails(ctx)
}

// addTrace adds a settled call's trace line and its tool message.
func (r *run) addTrace(ctx wf.Context, l TraceLine, msg threadstate.Message) {
	r.appendLine(ctx, l, r.convLen())
	r.addMessage(msg)
}

// appendLine adds a trace line; msg is its tool message's number, or -1.
func (r *run) appendLine(ctx wf.Context, l TraceLine, msg int) {
	r.trace = append(r.trace, l)
	r.traceMsg = append(r.traceMsg, msg)
	r.observeLine(ctx, l)
	r.publishLine(&r.trace[len(r.trace)-1])
}

func errText(s string) *string { return &s }

// resolve applies rule 1 to a call: its tool must exist and its argument
// text must parse under the limits. Otherwise it returns the rejection.
func (r *run) resolve(call threadstate.ToolCall) (*activities.Tool, *dedup.Args, *step) {
	tool, ok := r.tools[call.Name]
	if !ok {
		tool, ok = r.client[call.Name]
	}
	if !ok {
		return nil, nil, r.reject(call, fmt.Sprintf("unknown tool %q", call.Name))
	}
	args, err := dedup.Parse(call.Arguments, r.in.Limits)
	if err != nil {
		return nil, nil, r.reject(call, fmt.Sprintf("tool %s: %v", call.Name, err))
	}
	return tool, args, nil
}

func (r *run) reject(call threadstate.ToolCall, why string) *step {
	return &step{line: TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Outcome: OutcomeRejected, Error: errText(why)},
		msg: toolMessage(call.ID, nil, errText(why), false)}
}

// toolMessage is the tool result the model sees for a call.
func toolMessage(callID string, result json.RawMessage, errMsg *string, served bool) threadstate.Message {
	var content string
	if errMsg != nil {
		b, _ := json.Marshal(map[string]string{"error": *errMsg})
		content = string(b)
	} else {
		content = string(result)
	}
	return threadstate.Message{Role: "tool", ToolCallID: callID, Content: content, Served: served}
}

// hold is an interrupt raised at a call: the hook that raised it, its
// reason, the call's arguments as the model emitted them, and as the hooks
// that ran before the interrupting one left them (for tulip.approval: after
// every hook).
type hold struct {
	hook, reason string
	model, post  *dedup.Args
}

// shown is the held call's arguments as runs recorded before
// "tulip-held-args" showed them: after every hook for tulip.approval, as
// the model emitted them for a hook's interrupt.
func (h *hold) shown() *dedup.Args {
	if h.hook == ApprovalHook {
		return h.post
	}
	return h.model
}

// handleCall takes one call through reject, hooks, cancel, interrupt, and
// match or execute; the execution is started, not awaited. It returns the
// hold instead of a step when the call interrupts the run.
func (r *run) handleCall(ctx wf.Context, call threadstate.ToolCall, response int) (*step, *hold) {
	tool, args, rejected := r.resolve(call)
	if rejected != nil {
		return rejected, nil
	}
	post, cancelled, h := r.beforeHooks(ctx, call, args, response, false)
	if cancelled != nil {
		return cancelled, nil
	}
	if h != nil {
		return nil, h
	}
	mode := calllog.Matched
	if r.resumed || !tool.Spec().Idempotent {
		mode = calllog.Recorded
	}
	// In a fork: the origin made this call (it is served from there, and
	// was approved there).
	fromOrigin := r.origin != nil && r.origin.find(tool.Spec().Name, post) != nil
	if h, held := r.holdsNew(tool, post, response, mode, fromOrigin); held {
		h.model = args
		return nil, h
	}
	if reason, ask := r.needsApproval(tool, post, response); ask && !fromOrigin {
		return nil, &hold{hook: ApprovalHook, reason: reason, model: args, post: post}
	}
	var pre *dedup.Args
	if post != args {
		pre = args
	}
	if r.isClient(tool) {
		return r.clientCall(ctx, tool, call, post, pre, response, mode), nil
	}
	return r.launch(ctx, tool, call, post, pre, response, mode), nil
}

// beforeHooks runs the installed hooks on a call (rule 2) and returns its
// post-hook arguments (args itself when no hook rewrote them). A cancel is
// recorded, with the model's arguments, and returned as the call's step. An
// interrupt is returned as a hold, unless performing: a held call a resume
// performs was answered by that resume, so no hook holds it again (the
// hooks after the interrupting one still run).
func (r *run) beforeHooks(ctx wf.Context, call threadstate.ToolCall, args *dedup.Args, response int, performing bool) (*dedup.Args, *step, *hold) {
	if len(r.hooks) == 0 {
		return args, nil, nil // no hook to run: the call's hook view (a copy of its arguments) would go unread
	}
	hc := hooks.NewCall(call.ID, call.Name, args.Value())
	hc.Agent, hc.Thread, hc.Turn = r.in.Agent, r.in.ThreadID, r.turn
	post := func() *dedup.Args {
		if hc.Changed() {
			return dedup.NewArgs(*hc.Args())
		}
		return args
	}
	for _, name := range r.hooks {
		d := r.cfg.Hooks[name](hc)
		if d.Cancel != "" {
			r.calls.Cancel(calllog.Call{Tool: call.Name, CallID: call.ID, Args: args, Response: response, Turn: r.turn, Run: r.runID}, d.Cancel)
			return nil, &step{line: TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Arguments: json.RawMessage(args.Text()),
				Outcome: OutcomeCancelled, Error: errText(d.Cancel)}, msg: toolMessage(call.ID, nil, errText(d.Cancel), false)}, nil
		}
		if d.Interrupt != "" && !performing {
			if r.madeByOrigin(ctx, call.Name, post()) {
				// In a fork, a call its origin made is served from
				// there: it ran, and was answered, in the origin.
				continue
			}
			return nil, nil, &hold{hook: name, reason: d.Interrupt, model: args, post: post()}
		}
	}
	return post(), nil, nil
}

// launch starts one call's execution (or, through the run's call log,
// serves it) and returns its step, to be settled by finish. pre, when a
// hook rewrote the call, is its arguments as the model emitted them; mode
// is how the call meets the log.
func (r *run) launch(ctx wf.Context, tool *activities.Tool, call threadstate.ToolCall, args, pre *dedup.Args, response int, mode calllog.Mode) *step {
	spec := tool.Spec()
	key := r.key(spec, args)
	st := &step{started: calllog.Call{Tool: spec.Name, CallID: call.ID, Args: args, Response: response, Turn: r.turn, Run: r.runID,
		Key: key, Mode: mode}}
	c := &st.started
	if served := r.serveOrigin(ctx, c, spec); served != nil {
		return served
	}
	in := activities.ToolInput{Tool: spec.Name, CallID: call.ID, Arguments: args.Text(), IdempotencyKey: key, Agent: r.in.Agent, Thread: r.in.ThreadID,
		Toolset: spec.Toolset}
	var f wf.Future
	if tool.SubAgent() != nil {
		// A child workflow, not an activity: the log decides it here (no
		// interceptor routes it), served or started.
		mctx := r.calls.Mark(ctx, c)
		st.direct, st.child = true, &childRun{}
		f = c.Start(mctx, func() wf.Future { return r.launchSub(ctx, tool, in, st.child) })
	} else if spec.Local {
		opts := tool.Options()
		lctx := wf.WithLocalActivityOptions(ctx, wf.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, RetryPolicy: opts.RetryPolicy,
			Summary: activitySummary(spec.Name, key)})
		// A local activity is handed its arguments as Go values, not encoded.
		f = wf.ExecuteLocalActivity(r.calls.Mark(lctx, c), tool.ActivityName(), in)
	} else {
		replaying := wf.IsReplaying(ctx)
		var input any
		if replaying {
			input = r.unsent()
		} else {
			input = activities.ToolInputJSON(in).Payload()
		}
		if spec.OnUnknown == protocol.OnUnknownCheck || spec.OnUnknown == protocol.OnUnknownHold {
			c.Resolve = r.resolveUnknown(st, tool, in)
		}
		f = wf.ExecuteActivity(r.calls.Mark(r.activityContext(ctx, tool, key, replaying), c), tool.ActivityName(), input)
	}
	line := &st.line
	*line = TraceLine{Turn: r.turn, CallID: call.ID, Tool: spec.Name, Arguments: json.RawMessage(args.Text()), Outcome: OutcomeExecuted, Key: key}
	if c.Served() {
		seq := c.ServedFrom.Seq
		line.Outcome, line.ServedFrom, line.Relation, line.Key = OutcomeCached, &seq, c.Relation, c.ServedFrom.Key
	} else {
		r.executions++
		if r.stateByRef {
			// Why did it run again? Only now, on a miss of a tool with
			// records.
			line.NearMiss = c.Explain(pre, spec.Idempotent, mode != calllog.Unrecorded && !r.resumed)
		}
	}
	st.call, st.future = c, f
	return st
}

// While a run replays, the command that schedules a tool activity is
// matched to its recorded event and never sent: the SDK matches an
// activity by its ID and type alone (the completion by its type), and
// drops the command. What only the command carries (the input, the
// Summary, the result) is not made then: unsent stands for it, a JSON
// null the run's own (a data converter's codec may see it, and may
// change a payload it sees: only this run's workflow code, whose
// coroutines take turns, ever hands it over).
func (r *run) unsent() converter.RawValue {
	if r.placeholder.Payload() == nil {
		r.placeholder = activities.JSONPayload([]byte("null"))
	}
	return r.placeholder
}

// activityContext is ctx with a tool activity's options. Its Summary
// names the call for the Web UI; while the run replays, the options
// carry no Summary and are made once a tool.
func (r *run) activityContext(ctx wf.Context, tool *activities.Tool, key string, replaying bool) wf.Context {
	spec := tool.Spec()
	options := func() wf.ActivityOptions {
		opts := tool.Options()
		return wf.ActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, RetryPolicy: opts.RetryPolicy, HeartbeatTimeout: opts.HeartbeatTimeout}
	}
	if !replaying {
		o := options()
		o.Summary = activitySummary(spec.Name, key)
		return wf.WithActivityOptions(ctx, o)
	}
	c := &r.replayContexts
	if c.parent != ctx {
		*c = replayContexts{parent: ctx, byTool: map[string]wf.Context{}}
	}
	actx, ok := c.byTool[spec.Name]
	if !ok {
		actx = wf.WithActivityOptions(ctx, options())
		c.byTool[spec.Name] = actx
	}
	return actx
}

// replayContexts are the tools' activity contexts made from parent while
// the run replays (activityContext).
type replayContexts struct {
	parent wf.Context
	byTool map[string]wf.Context
}

// activitySummary is a tool activity's Summary, shown by the Web UI (user
// metadata: no event of its own): the tool and its downstream key.
func activitySummary(tool, key string) string {
	if key == "" {
		return tool
	}
	return tool + " · " + key
}
