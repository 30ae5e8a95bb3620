package agentrun

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

func (r *run) registerHandlers(ctx wf.Context) error {
	if err := wf.SetQueryHandler(ctx, QueryState, func() (StateView, error) { return r.view(), nil }); err != nil {
		return err
	}
	if err := wf.SetQueryHandler(ctx, QueryLog, func() ([]dedup.Record, error) { return r.log.Records(), nil }); err != nil {
		return err
	}
	if err := wf.SetQueryHandler(ctx, QueryConversation, r.conversationPage); err != nil {
		return err
	}
	if err := wf.SetQueryHandler(ctx, QueryPage, r.page); err != nil {
		return err
	}
	// Updates and signals take their input as JSON and decode it strictly:
	// a validator refuses an unknown field before the update is accepted.
	if err := wf.SetUpdateHandlerWithOptions(ctx, UpdateResume,
		func(ctx wf.Context, raw json.RawMessage) (ResumeResult, error) {
			var in ResumeInput
			if err := decodeStrict("resume input", raw, &in); err != nil {
				return ResumeResult{}, err
			}
			return r.acceptResume(in), nil
		},
		wf.UpdateHandlerOptions{Validator: func(ctx wf.Context, raw json.RawMessage) error {
			var in ResumeInput
			if err := decodeStrict("resume input", raw, &in); err != nil {
				return err
			}
			return r.checkResume(in)
		}},
	); err != nil {
		return err
	}
	return wf.SetUpdateHandlerWithOptions(ctx, UpdateHooks,
		func(ctx wf.Context, raw json.RawMessage) error {
			var in HooksInput
			if err := decodeStrict("hooks input", raw, &in); err != nil {
				return err
			}
			return r.changeHooks(in)
		},
		wf.UpdateHandlerOptions{Validator: func(ctx wf.Context, raw json.RawMessage) error {
			var in HooksInput
			if err := decodeStrict("hooks input", raw, &in); err != nil {
				return err
			}
			return r.checkHooks(in)
		}},
	)
}

func (r *run) checkHooks(in HooksInput) error {
	for _, name := range slices.Concat(in.Install, in.Remove) {
		if _, ok := r.cfg.Hooks[name]; !ok {
			has := "it has none"
			if len(r.cfg.Hooks) > 0 {
				has = "its hooks: " + strings.Join(slices.Sorted(maps.Keys(r.cfg.Hooks)), ", ")
			}
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no hook named %q on this worker (%s)", name, has), protocol.ErrUnknownHook, nil)
		}
	}
	return nil
}

func (r *run) changeHooks(in HooksInput) error {
	if err := r.checkHooks(in); err != nil {
		return err
	}
	for _, name := range in.Remove {
		r.hooks = slices.DeleteFunc(r.hooks, func(h string) bool { return h == name })
	}
	for _, name := range in.Install {
		if !slices.Contains(r.hooks, name) {
			r.hooks = append(r.hooks, name)
		}
	}
	return nil
}

// drainSignals applies hook signals received so far, in order. A signal
// whose body is not a valid HooksInput, or names a hook the worker does not
// have, is logged and dropped whole.
func (r *run) drainSignals(ctx wf.Context) {
	if r.hooksSignal == nil { // looked up once: it is drained before every call
		r.hooksSignal = wf.GetSignalChannel(ctx, SignalHooks)
	}
	ch := r.hooksSignal
	for ch.Len() > 0 { // asked first: a receive's value escapes, and most calls find none
		var raw json.RawMessage
		if !ch.ReceiveAsync(&raw) {
			return
		}
		var in HooksInput
		err := decodeStrict("hooks signal", raw, &in)
		if err == nil {
			err = r.changeHooks(in)
		}
		if err != nil {
			wf.GetLogger(ctx).Warn("hook signal dropped", "error", err)
		}
	}
}

// receiveResume takes the resume signals received so far until one is
// accepted. Invalid ones are logged and dropped.
func (r *run) receiveResume(ctx wf.Context, sig wf.ReceiveChannel) {
	for r.pending == nil {
		var raw json.RawMessage
		if !sig.ReceiveAsync(&raw) {
			return
		}
		var in ResumeInput
		err := decodeStrict("resume signal", raw, &in)
		switch {
		case err != nil:
		case in.InterruptID == "":
			err = badInput("a resume signal must name its interrupt")
		default:
			err = r.checkResume(in)
		}
		if err != nil {
			wf.GetLogger(ctx).Warn("resume signal dropped", "error", err)
			if r.interrupt != nil && in.InterruptID == r.interrupt.ID {
				// A sub-agent's resume comes from its parent, which has
				// closed its own interrupt: it is told again.
				r.tellParent(ctx)
			}
			continue
		}
		r.acceptResume(in)
	}
}

func (r *run) checkResume(in ResumeInput) error {
	if in.InterruptID != "" && r.answered[in.InterruptID] {
		return nil // a duplicate: accepted, takes no effect
	}
	if r.interrupt == nil || r.pending != nil {
		return temporal.NewNonRetryableApplicationError("the run is not interrupted: there is nothing to resume", protocol.ErrNotInterrupted, nil)
	}
	if in.InterruptID != "" && in.InterruptID != r.interrupt.ID {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("interrupt %q is not the current one (%q)", in.InterruptID, r.interrupt.ID), protocol.ErrStaleInterrupt, nil)
	}
	return r.checkResults(in)
}

func (r *run) acceptResume(in ResumeInput) ResumeResult {
	if in.InterruptID != "" && r.answered[in.InterruptID] {
		return ResumeResult{InterruptID: in.InterruptID, Duplicate: true}
	}
	in.InterruptID = r.interrupt.ID
	r.answered[in.InterruptID] = true
	r.pending = &in
	return ResumeResult{InterruptID: in.InterruptID}
}

// pause holds calls (the interrupted one and the rest of its response),
// waits for a resume, then runs or drops them.
//
// What a performed held call runs (runs recorded before "tulip-held-args"
// replay as they ran: the interrupted call shown as shown(), and every held
// call run with the model's arguments, past no hook):
//   - the interrupted call runs with exactly the arguments its held line
//     showed: as the hooks that ran before the interrupting one left them
//     (for tulip.approval, every hook). The hooks after the interrupting
//     one do not see it: what was approved is what runs;
//   - each later call of the response goes through the before-hooks
//     installed when it is performed, as any call does: a rewrite applies
//     (its dangling line shows and runs the rewritten arguments), a cancel
//     cancels it (recorded and shown as cancelled, rule 3). No hook and no
//     approval holds it again: the resume answered the interrupt for every
//     call it held.
//
// Performed calls run without matching and are never recorded.
func (r *run) pause(ctx wf.Context, h *hold, held []threadstate.ToolCall, response int) error {
	// Runs recorded before this change show, and run, what they did.
	v1 := r.version(ctx, "tulip-held-args") == 1
	first := h.shown()
	if v1 {
		first = h.post
	}
	hook, reason := h.hook, h.reason
	if err := r.awaitNoInterrupt(ctx); err != nil {
		return err
	}
	r.interrupts++
	r.interrupt = &Interrupt{ID: fmt.Sprintf("int-%d", r.interrupts), Turn: r.turn, Hook: hook, Reason: reason, Held: held}
	heldArgs := make([]json.RawMessage, len(held))
	for i, call := range held {
		var args json.RawMessage
		if i == 0 {
			args = json.RawMessage(first.Text())
		} else if a, err := dedup.Parse(call.Arguments, r.in.Limits); err == nil {
			args = json.RawMessage(a.Text())
		}
		heldArgs[i] = args
		r.appendLine(ctx, TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Arguments: args, Outcome: OutcomeHeld}, -1)
	}
	resume, err := r.waitResume(ctx, hook)
	if err != nil {
		return err
	}
	if resume.PerformDangling && !r.keepPerformed {
		// The calls it performs are kept in the thread's state, outside
		// the log, for forks (runs recorded before this change kept none).
		r.keepPerformed = r.version(ctx, "tulip-keep-performed") == 1
	}
	var steps []*step
	for i, call := range held {
		if !resume.PerformDangling {
			msg := "not performed: " + resume.Answer
			var args json.RawMessage
			if r.stateByRef { // the dropped line names what was not done, as its held line did
				args = heldArgs[i]
			}
			steps = r.enqueue(ctx, steps, &step{line: TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Arguments: args, Outcome: OutcomeDropped, Error: errText(msg)},
				msg: toolMessage(call.ID, nil, errText(msg), false)})
			continue
		}
		if v1 {
			if st := r.perform(ctx, call, i == 0, h.model, first, response); st != nil {
				steps = r.enqueue(ctx, steps, st)
			}
			continue
		}
		tool, args, rejected := r.resolve(call)
		if rejected != nil {
			steps = r.enqueue(ctx, steps, rejected)
			continue
		}
		if r.isClient(tool) {
			r.holdClient(call, args, nil, r.log.Response(), calllog.Unrecorded, tool.Spec())
			continue
		}
		// A dangling call runs without matching and is never recorded.
		st := r.launch(ctx, tool, call, args, nil, r.log.Response(), calllog.Unrecorded)
		markDangling(st)
		steps = r.enqueue(ctx, steps, st)
	}
	r.finish(ctx, steps)
	if len(r.clientHeld) > 0 {
		// Client calls held in this response (before the interrupt, or
		// performed by the resume) are answered before the user's answer
		// joins the conversation: a response's tool messages follow it.
		if err := r.awaitClient(ctx); err != nil {
			return err
		}
	}
	if hook == ForkHook && r.version(ctx, "tulip-fork-hold-call-only") == 1 {
		// A fork's hold asks about its calls alone (did the origin's
		// thread make them? run them?): its answer is their tool
		// messages, as a client tool's result or an unknown outcome's
		// answer is. No user turn is added (nobody said it: tulip eval's
		// decline is no question for the model), the phase stays, and
		// the run goes on matching. Forks recorded before replay as they
		// ran.
		return nil
	}
	r.addMessage(threadstate.Message{Role: "user", Content: resume.Answer})
	r.resumed = true
	r.phase++
	r.phaseTurn = 0
	return nil
}

// perform runs a held call a resume performs (see pause): the interrupted
// one with the arguments its held line showed (model: as the model emitted
// them, first: as shown), a later one through the before-hooks. It runs
// without matching and is never recorded; a hook's cancel is recorded.
func (r *run) perform(ctx wf.Context, call threadstate.ToolCall, interrupted bool, model, first *dedup.Args, response int) *step {
	tool, parsed, rejected := r.resolve(call)
	if rejected != nil {
		return rejected
	}
	args := first
	if !interrupted {
		r.drainSignals(ctx) // hooks a signal installed are installed before this call, as in the loop
		post, cancelled, _ := r.beforeHooks(ctx, call, parsed, response, true)
		if cancelled != nil {
			return cancelled
		}
		args, model = post, parsed
	}
	var pre *dedup.Args
	if args != model {
		pre = model
	}
	if r.isClient(tool) {
		// The caller runs it: held for the caller with the response's
		// other client calls (never recorded, as any performed call).
		r.holdClient(call, args, pre, response, calllog.Unrecorded, tool.Spec())
		return nil
	}
	st := r.launch(ctx, tool, call, args, pre, response, calllog.Unrecorded)
	markDangling(st)
	return st
}

// markDangling marks a held call a resume performs: it ran (dangling),
// unless a fork's origin served it.
func markDangling(st *step) {
	if st.line.Outcome == OutcomeExecuted {
		st.line.Outcome = OutcomeDangling
	}
}

// waitResume publishes the open interrupt (raised by hook), waits for the
// resume that answers it, and returns that resume.
func (r *run) waitResume(ctx wf.Context, hook string) (*ResumeInput, error) {
	return r.waitResumeUnless(ctx, hook, nil, 0)
}

// waitResumeUnless is waitResume that also gives up when gone reports
// true (a sub-agent whose interrupt this is has closed): the interrupt is
// withdrawn and it returns nil, nil. With a timeout, a resume that has
// not come by then is made up: marked expired, answering nothing.
func (r *run) waitResumeUnless(ctx wf.Context, hook string, gone func() bool, timeout time.Duration) (*ResumeInput, error) {
	r.count(ctx, "interrupt-opened/"+r.interrupt.ID, MetricInterruptsOpened, 1, "hook", hook)
	r.status = StatusInterrupted
	r.showDetails(ctx)
	// Publish the interrupt durably (runs recorded before this change
	// replay without the memo).
	memo := r.version(ctx, "tulip-interrupt-memo") == 1
	if memo {
		if err := wf.UpsertMemo(ctx, map[string]any{MemoInterrupt: r.interrupt.ID}); err != nil {
			return nil, err
		}
	}
	r.tellParent(ctx)
	if r.stream != nil && r.streamOnDemand {
		// The run waits: batches published by signal so far are read now,
		// so that the stream's offset (its query) counts them.
		r.stream.Sync()
	}
	sig := wf.GetSignalChannel(ctx, SignalResume)
	var deadline time.Time
	if timeout > 0 && r.version(ctx, "tulip-client-timeout") == wf.DefaultVersion {
		// A run an older worker began waiting without a timer replays
		// without one.
		timeout = 0
	}
	if timeout > 0 {
		deadline = wf.Now(ctx).Add(timeout)
	}
	for r.pending == nil {
		r.receiveResume(ctx, sig)
		if r.pending != nil {
			break
		}
		cond := func() bool { return r.pending != nil || sig.Len() > 0 || gone != nil && gone() }
		if timeout > 0 {
			ok, err := wf.AwaitWithTimeout(ctx, max(deadline.Sub(wf.Now(ctx)), time.Millisecond), cond)
			if err != nil {
				return nil, err
			}
			if !ok && r.pending == nil && sig.Len() == 0 {
				r.answered[r.interrupt.ID] = true
				r.pending = &ResumeInput{InterruptID: r.interrupt.ID, expired: true}
				break
			}
		} else if err := wf.Await(ctx, cond); err != nil {
			return nil, err
		}
		if r.pending == nil && sig.Len() == 0 && gone != nil && gone() {
			id := r.interrupt.ID
			r.count(ctx, "interrupt-resumed/"+id, MetricInterruptsResumed, 1, "hook", hook) // closed: withdrawn
			r.interrupt, r.status = nil, StatusRunning
			if memo {
				if err := wf.UpsertMemo(ctx, map[string]any{MemoInterrupt: ""}); err != nil {
					return nil, err
				}
			}
			r.showDetails(ctx)
			r.tellWithdrawn(ctx, id)
			return nil, nil
		}
	}
	resume := r.pending
	r.count(ctx, "interrupt-resumed/"+resume.InterruptID, MetricInterruptsResumed, 1, "hook", hook)
	r.pending, r.interrupt, r.status = nil, nil, StatusRunning
	if memo {
		if err := wf.UpsertMemo(ctx, map[string]any{MemoInterrupt: ""}); err != nil {
			return nil, err
		}
	}
	return resume, nil
}
