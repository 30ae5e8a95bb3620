package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/dedup"
	"github.com/tulip-temporal/tulip/hooks"
	"github.com/tulip-temporal/tulip/interceptor"
)

// Config is what the worker gives the workflow: its tools and hooks.
type Config struct {
	// Tools the model may call, in the order shown to it.
	Tools []*activities.Tool
	// Hooks by name.
	Hooks map[string]hooks.Hook
	// CustomCheckpointer: the worker's Checkpointer is not the Temporal
	// default, so checkpoints are loaded for every thread run and saved by
	// an activity.
	CustomCheckpointer bool
}

// New returns the agent-run workflow function for cfg. Register it under
// WorkflowName.
func New(cfg Config) (func(ctx wf.Context, in RunInput) (RunResult, error), error) {
	tools := make(map[string]*activities.Tool, len(cfg.Tools))
	specs := make([]activities.ToolSpec, 0, len(cfg.Tools))
	for _, t := range cfg.Tools {
		if t == nil {
			return nil, errors.New("tulip: nil tool")
		}
		if _, dup := tools[t.Spec().Name]; dup {
			return nil, fmt.Errorf("tulip: tool %q declared twice", t.Spec().Name)
		}
		tools[t.Spec().Name] = t
		specs = append(specs, t.Spec())
	}
	return func(ctx wf.Context, in RunInput) (RunResult, error) {
		r := &run{cfg: &cfg, tools: tools, specs: specs, in: in, answered: map[string]bool{}}
		return r.main(ctx)
	}, nil
}

type run struct {
	cfg   *Config
	tools map[string]*activities.Tool
	specs []activities.ToolSpec
	in    RunInput

	state    *interceptor.State // nil without the dedup interceptor
	log      *dedup.Log         // the state's log, or a private one
	loaded   *activities.Checkpoint
	hooks    []string
	messages []activities.Message

	parallel   bool // the calls of a response run at once
	status     string
	turn       int
	phase      int
	phaseTurn  int
	resumed    bool
	trace      []TraceLine
	answer     string
	failure    string
	interrupt  *Interrupt
	answered   map[string]bool
	pending    *ResumeInput
	interrupts int
	executions int // executions started by this run (for non-idempotent keys)
	baseLen    int // log length after the checkpoint loaded

	namespace, scope, runID string
}

func badInput(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, activities.ErrBadInput, nil)
}

func (r *run) main(ctx wf.Context) (RunResult, error) {
	info := wf.GetInfo(ctx)
	r.namespace, r.runID = info.Namespace, info.WorkflowExecution.RunID
	r.scope = "run:" + info.WorkflowExecution.ID
	if r.in.ThreadID != "" {
		r.scope = "thread:" + r.in.ThreadID
	}
	if r.in.Agent == "" {
		r.in.Agent = DefaultAgent
	}
	if r.in.MaxTurns <= 0 {
		r.in.MaxTurns = DefaultMaxTurns
	}
	if r.in.Model == "" {
		return RunResult{}, badInput("run input names no model")
	}
	if err := r.changeHooks(HooksInput{Install: r.in.Hooks}); err != nil {
		return RunResult{}, err
	}
	r.status = StatusRunning
	r.state = interceptor.StateFrom(ctx)
	if r.state != nil {
		r.log = r.state.Log()
	} else {
		r.log = dedup.NewLog()
	}
	if err := r.registerHandlers(ctx); err != nil {
		return RunResult{}, err
	}
	if err := r.loadCheckpoint(ctx); err != nil {
		return RunResult{}, err
	}
	if r.in.Message != "" {
		r.messages = append(r.messages, activities.Message{Role: "user", Content: r.in.Message})
	}
	if err := r.loop(ctx); err != nil {
		return r.fail(ctx, err)
	}
	r.status = StatusCompleted
	res := r.view()
	if err := r.saveCheckpoint(ctx, &res); err != nil {
		return RunResult{}, err
	}
	return res, nil
}

func (r *run) view() RunResult {
	return RunResult{
		Status: r.status, Agent: r.in.Agent, ThreadID: r.in.ThreadID, Answer: r.answer,
		Turns: r.turn, Trace: r.trace, Interrupt: r.interrupt, Error: r.failure,
	}
}

// fail ends the run with a non-retryable failure whose details hold the run
// result, checkpoint included, so the thread keeps what this run recorded.
func (r *run) fail(ctx wf.Context, cause error) (RunResult, error) {
	r.status = StatusFailed
	r.failure = cause.Error()
	res := r.view()
	_ = r.saveCheckpoint(ctx, &res)
	errType := "tulip.RunFailed"
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) && strings.HasPrefix(appErr.Type(), "tulip.") {
		errType = appErr.Type()
	}
	return RunResult{}, temporal.NewNonRetryableApplicationError(cause.Error(), errType, cause, res)
}

func (r *run) registerHandlers(ctx wf.Context) error {
	if err := wf.SetQueryHandler(ctx, QueryState, func() (StateView, error) { return r.view(), nil }); err != nil {
		return err
	}
	if err := wf.SetQueryHandler(ctx, QueryLog, func() ([]dedup.Record, error) { return r.log.Records(), nil }); err != nil {
		return err
	}
	if err := wf.SetUpdateHandlerWithOptions(ctx, UpdateResume,
		func(ctx wf.Context, in ResumeInput) (ResumeResult, error) { return r.acceptResume(in), nil },
		wf.UpdateHandlerOptions{Validator: func(ctx wf.Context, in ResumeInput) error { return r.checkResume(in) }},
	); err != nil {
		return err
	}
	return wf.SetUpdateHandlerWithOptions(ctx, UpdateHooks,
		func(ctx wf.Context, in HooksInput) error { return r.changeHooks(in) },
		wf.UpdateHandlerOptions{Validator: func(ctx wf.Context, in HooksInput) error { return r.checkHooks(in) }},
	)
}

func (r *run) checkHooks(in HooksInput) error {
	for _, name := range slices.Concat(in.Install, in.Remove) {
		if _, ok := r.cfg.Hooks[name]; !ok {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no hook named %q on this worker", name), activities.ErrUnknownHook, nil)
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

// drainSignals applies hook signals received so far, in order.
func (r *run) drainSignals(ctx wf.Context) {
	ch := wf.GetSignalChannel(ctx, SignalHooks)
	var in HooksInput
	for ch.ReceiveAsync(&in) {
		if err := r.changeHooks(in); err != nil {
			wf.GetLogger(ctx).Warn("hook signal refused", "error", err)
		}
		in = HooksInput{}
	}
}

func (r *run) checkResume(in ResumeInput) error {
	if in.InterruptID != "" && r.answered[in.InterruptID] {
		return nil // a duplicate: accepted, takes no effect
	}
	if r.interrupt == nil || r.pending != nil {
		return temporal.NewNonRetryableApplicationError("the run is not interrupted: there is nothing to resume", activities.ErrNotInterrupted, nil)
	}
	if in.InterruptID != "" && in.InterruptID != r.interrupt.ID {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("interrupt %q is not the current one (%q)", in.InterruptID, r.interrupt.ID), activities.ErrStaleInterrupt, nil)
	}
	return nil
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

func (r *run) loadCheckpoint(ctx wf.Context) error {
	if r.in.ThreadID == "" || (r.in.PreviousRunID == "" && !r.cfg.CustomCheckpointer) {
		return nil
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var cp activities.Checkpoint
	ref := activities.ThreadRef{ThreadID: wf.GetInfo(ctx).WorkflowExecution.ID, RunID: r.runID, PreviousRunID: r.in.PreviousRunID}
	if err := wf.ExecuteActivity(actx, activities.LoadCheckpointActivity, ref).Get(ctx, &cp); err != nil {
		return err
	}
	r.loaded = &cp
	if snap, ok := cp.Agents[r.in.Agent]; ok && r.state != nil {
		l, err := dedup.Restore(snap)
		if err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("thread %s: %v", r.in.ThreadID, err), activities.ErrCheckpoint, err)
		}
		r.state.SetLog(l)
		r.log = l
	}
	r.baseLen = r.log.Len()
	return nil
}

func (r *run) saveCheckpoint(ctx wf.Context, res *RunResult) error {
	if r.in.ThreadID == "" {
		return nil
	}
	cp := &activities.Checkpoint{Agents: map[string]json.RawMessage{}}
	if r.loaded != nil {
		for name, snap := range r.loaded.Agents { // map copy: order does not matter
			cp.Agents[name] = snap
		}
	}
	snap, err := r.log.Snapshot()
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrCheckpoint, err)
	}
	cp.Agents[r.in.Agent] = snap
	res.Checkpoint = cp
	if !r.cfg.CustomCheckpointer {
		return nil
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	ref := activities.ThreadRef{ThreadID: wf.GetInfo(ctx).WorkflowExecution.ID, RunID: r.runID, PreviousRunID: r.in.PreviousRunID}
	return wf.ExecuteActivity(actx, activities.SaveCheckpointActivity, ref, cp).Get(ctx, nil)
}

func (r *run) loop(ctx wf.Context) error {
	mctx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	// Runs recorded before calls ran at once replay sequentially.
	r.parallel = wf.GetVersion(ctx, "tulip-parallel-calls", wf.DefaultVersion, 1) == 1 && !r.in.SequentialCalls
	for {
		if r.turn >= r.in.MaxTurns {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the run reached its limit of %d model turns", r.in.MaxTurns), activities.ErrMaxTurns, nil)
		}
		r.turn++
		r.phaseTurn++
		r.drainSignals(ctx)
		var resp activities.ModelResponse
		req := activities.ModelRequest{Model: r.in.Model, Agent: r.in.Agent, Thread: r.in.ThreadID, Turn: r.turn,
			Phase: r.phase, PhaseTurn: r.phaseTurn, Messages: r.messages, Tools: r.specs}
		if err := wf.ExecuteActivity(mctx, activities.ModelActivity, req).Get(ctx, &resp); err != nil {
			return err
		}
		if err := r.changeHooks(HooksInput{Install: resp.InstallHooks, Remove: resp.RemoveHooks}); err != nil {
			return err
		}
		response := r.log.BeginResponse()
		r.messages = append(r.messages, activities.Message{Role: "assistant", Content: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			r.answer = resp.Text
			return nil
		}
		var steps []*step
		for i, call := range resp.ToolCalls {
			r.drainSignals(ctx)
			st, hook, reason, args, held := r.handleCall(ctx, call, response)
			if held {
				r.finish(ctx, steps) // what started before the interrupt settles first
				steps = nil
				if err := r.pause(ctx, hook, reason, args, resp.ToolCalls[i:]); err != nil {
					return err
				}
				break
			}
			steps = r.enqueue(ctx, steps, st)
		}
		r.finish(ctx, steps)
	}
}

// step is one call of the current response: settled already (rejected,
// cancelled), or executing (or served) through the interceptor.
type step struct {
	line   TraceLine
	msg    activities.Message
	call   *interceptor.Call
	future wf.Future
}

// enqueue settles st at once when calls run one after another, and keeps
// it for finish when they run at once.
func (r *run) enqueue(ctx wf.Context, steps []*step, st *step) []*step {
	if r.parallel {
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
			var out activities.ToolOutput
			err := st.future.Get(ctx, &out)
			st.call.Settle(&out, err)
			if err != nil {
				st.line.Error = errText(interceptor.ToolErrorOf(err).Message)
			} else {
				st.line.Result = out.Result
			}
			st.msg = toolMessage(st.line.CallID, st.line.Result, st.line.Error, st.call.ServedFrom != nil)
		}
		r.addTrace(st.line, st.msg)
	}
}

func (r *run) addTrace(l TraceLine, msg activities.Message) {
	r.trace = append(r.trace, l)
	r.messages = append(r.messages, msg)
}

func errText(s string) *string { return &s }

// resolve applies rule 1 to a call: its tool must exist and its argument
// text must parse under the limits. Otherwise it returns the rejection.
func (r *run) resolve(call activities.ToolCall) (*activities.Tool, *dedup.Args, *step) {
	tool, ok := r.tools[call.Name]
	if !ok {
		return nil, nil, r.reject(call, fmt.Sprintf("unknown tool %q", call.Name))
	}
	args, err := dedup.Parse(call.Arguments, r.in.Limits)
	if err != nil {
		return nil, nil, r.reject(call, fmt.Sprintf("tool %s: %v", call.Name, err))
	}
	return tool, args, nil
}

func (r *run) reject(call activities.ToolCall, why string) *step {
	return &step{line: TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Outcome: OutcomeRejected, Error: errText(why)},
		msg: toolMessage(call.ID, nil, errText(why), false)}
}

// toolMessage is the tool result the model sees for a call.
func toolMessage(callID string, result json.RawMessage, errMsg *string, served bool) activities.Message {
	var content string
	if errMsg != nil {
		b, _ := json.Marshal(map[string]string{"error": *errMsg})
		content = string(b)
	} else {
		content = string(result)
	}
	return activities.Message{Role: "tool", ToolCallID: callID, Content: content, Served: served}
}

// handleCall takes one call through reject, hooks, cancel, interrupt, and
// match or execute; the execution is started, not awaited. It reports
// held=true when a hook interrupts the run.
func (r *run) handleCall(ctx wf.Context, call activities.ToolCall, response int) (st *step, hook, reason string, args *dedup.Args, held bool) {
	tool, args, rejected := r.resolve(call)
	if rejected != nil {
		return rejected, "", "", nil, false
	}
	hc := hooks.NewCall(call.ID, call.Name, args.Value())
	hc.Agent, hc.Thread, hc.Turn = r.in.Agent, r.in.ThreadID, r.turn
	for _, name := range r.hooks {
		d := r.cfg.Hooks[name](hc)
		if d.Cancel != "" {
			r.log.Append(dedup.Record{Tool: call.Name, Response: response, Run: r.runID, Turn: r.turn, CallID: call.ID,
				Origin: dedup.Cancelled, Error: &dedup.ToolError{Type: dedup.ErrorTypeCancelled, Message: d.Cancel}}, args)
			return &step{line: TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Arguments: json.RawMessage(args.Text()),
				Outcome: OutcomeCancelled, Error: errText(d.Cancel)}, msg: toolMessage(call.ID, nil, errText(d.Cancel), false)}, "", "", nil, false
		}
		if d.Interrupt != "" {
			return nil, name, d.Interrupt, args, true
		}
	}
	post := args
	if hc.Changed() {
		post = dedup.NewArgs(*hc.Args())
	}
	return r.launch(ctx, tool, call, post, response, !r.resumed, true), "", "", nil, false
}

// launch starts one call's execution (or, through the interceptor, serves
// it) and returns its step, to be settled by finish.
func (r *run) launch(ctx wf.Context, tool *activities.Tool, call activities.ToolCall, args *dedup.Args, response int, match, record bool) *step {
	spec, opts := tool.Spec(), tool.Options()
	key := r.key(spec, args)
	c := &interceptor.Call{Tool: spec.Name, CallID: call.ID, Args: args, Response: response, Turn: r.turn, Run: r.runID,
		Key: key, Match: match && spec.Idempotent, Record: record}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, RetryPolicy: opts.RetryPolicy})
	actx = interceptor.WithCall(actx, c)
	in := activities.ToolInput{Tool: spec.Name, CallID: call.ID, Arguments: args.Text(), IdempotencyKey: key, Agent: r.in.Agent, Thread: r.in.ThreadID}
	f := wf.ExecuteActivity(actx, tool.ActivityName(), in)
	line := TraceLine{Turn: r.turn, CallID: call.ID, Tool: spec.Name, Arguments: json.RawMessage(args.Text()), Outcome: OutcomeExecuted, Key: key}
	if c.ServedFrom != nil {
		seq := c.ServedFrom.Seq
		line.Outcome, line.ServedFrom, line.Relation, line.Key = OutcomeCached, &seq, c.Relation, c.ServedFrom.Key
	} else {
		r.executions++
	}
	return &step{line: line, call: c, future: f}
}

// key is the execution's downstream idempotency key: the tool's template,
// or a hash of namespace, agent, thread (or run), tool and the canonical
// arguments; a non-idempotent tool's key also counts its executions, so
// each mint is new.
func (r *run) key(spec activities.ToolSpec, args *dedup.Args) string {
	if spec.KeyTemplate != "" {
		return expandKey(spec.KeyTemplate, args.Value())
	}
	h := sha256.New()
	for _, part := range []string{r.namespace, r.in.Agent, r.scope, spec.Name, args.ValueKey()} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	if !spec.Idempotent {
		fmt.Fprintf(h, "#%d", r.baseLen+r.executions)
	}
	return "tulip-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// expandKey replaces {name} in tmpl with the top-level argument name.
func expandKey(tmpl string, obj *dedup.Value) string {
	var sb strings.Builder
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			break
		}
		sb.WriteString(tmpl[:open])
		name := tmpl[open+1 : open+end]
		if v := obj.Get(name); v != nil {
			sb.WriteString(keyPart(v))
		}
		tmpl = tmpl[open+end+1:]
	}
	sb.WriteString(tmpl)
	return sb.String()
}

func keyPart(v *dedup.Value) string {
	switch v.Kind() {
	case dedup.String:
		return v.Str()
	case dedup.Int, dedup.Float:
		k := dedup.NewArgs(*v).ValueKey() // "i120;" or "d0.5;": 120 and 120.0 agree
		return strings.TrimSuffix(k[1:], ";")
	default:
		return dedup.NewArgs(*v).SortedKeyJSON()
	}
}

// pause holds calls (the interrupted one and the rest of its response),
// waits for a resume, then runs or drops them.
func (r *run) pause(ctx wf.Context, hook, reason string, first *dedup.Args, held []activities.ToolCall) error {
	r.interrupts++
	r.interrupt = &Interrupt{ID: fmt.Sprintf("int-%d", r.interrupts), Turn: r.turn, Hook: hook, Reason: reason, Held: held}
	for i, call := range held {
		var args json.RawMessage
		if i == 0 {
			args = json.RawMessage(first.Text())
		} else if a, err := dedup.Parse(call.Arguments, r.in.Limits); err == nil {
			args = json.RawMessage(a.Text())
		}
		r.trace = append(r.trace, TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Arguments: args, Outcome: OutcomeHeld})
	}
	r.status = StatusInterrupted
	// Publish the interrupt durably (runs recorded before this change
	// replay without the memo).
	memo := wf.GetVersion(ctx, "tulip-interrupt-memo", wf.DefaultVersion, 1) == 1
	if memo {
		if err := wf.UpsertMemo(ctx, map[string]any{MemoInterrupt: r.interrupt.ID}); err != nil {
			return err
		}
	}
	sig := wf.GetSignalChannel(ctx, SignalResume)
	for r.pending == nil {
		var in ResumeInput
		for r.pending == nil && sig.ReceiveAsync(&in) {
			if in.InterruptID == "" {
				wf.GetLogger(ctx).Warn("resume signal without an interrupt id dropped")
			} else if err := r.checkResume(in); err != nil {
				wf.GetLogger(ctx).Warn("resume signal dropped", "error", err)
			} else {
				r.acceptResume(in)
			}
			in = ResumeInput{}
		}
		if r.pending != nil {
			break
		}
		if err := wf.Await(ctx, func() bool { return r.pending != nil || sig.Len() > 0 }); err != nil {
			return err
		}
	}
	resume := r.pending
	r.pending, r.interrupt, r.status = nil, nil, StatusRunning
	if memo {
		if err := wf.UpsertMemo(ctx, map[string]any{MemoInterrupt: ""}); err != nil {
			return err
		}
	}
	var steps []*step
	for _, call := range held {
		if !resume.PerformDangling {
			msg := "not performed: " + resume.Answer
			steps = r.enqueue(ctx, steps, &step{line: TraceLine{Turn: r.turn, CallID: call.ID, Tool: call.Name, Outcome: OutcomeDropped, Error: errText(msg)},
				msg: toolMessage(call.ID, nil, errText(msg), false)})
			continue
		}
		tool, args, rejected := r.resolve(call)
		if rejected != nil {
			steps = r.enqueue(ctx, steps, rejected)
			continue
		}
		// A dangling call runs without matching and is never recorded.
		st := r.launch(ctx, tool, call, args, r.log.Response(), false, false)
		st.line.Outcome = OutcomeDangling
		steps = r.enqueue(ctx, steps, st)
	}
	r.finish(ctx, steps)
	r.messages = append(r.messages, activities.Message{Role: "user", Content: resume.Answer})
	r.resumed = true
	r.phase++
	r.phaseTurn = 0
	return nil
}
