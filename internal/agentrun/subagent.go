package agentrun

import (
	"encoding/json"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// ParentRef names, in a sub-agent's run input, the run that called it.
type ParentRef struct {
	// WorkflowID is the calling run's workflow (its current run is
	// signalled: the caller never continues as new while a child runs).
	WorkflowID string `json:"workflow_id"`
	// Path is this run's agent path from the top run ("support/refunds").
	Path string `json:"path"`
}

// SignalChildInterrupt is the signal a sub-agent's run sends its parent
// when it is interrupted (ChildInterrupt): the parent raises the same
// interrupt, and forwards the resume that answers it.
const SignalChildInterrupt = "tulip.child-interrupt"

// ChildInterrupt is a sub-agent's interrupt, as it tells its parent.
type ChildInterrupt struct {
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Interrupt  Interrupt `json:"interrupt"`
	// Rerun: the interrupt (of hook tulip.unknown) may run its call again.
	Rerun bool `json:"rerun,omitempty"`
	// Withdrawn: the interrupt Interrupt.ID is no longer open (the
	// sub-agent it relayed from closed): the parent withdraws its own.
	Withdrawn bool `json:"withdrawn,omitempty"`
}

// childRun is what a sub-agent's call publishes before its own line: the
// sub-agent's path and its run's settled calls (the lines its result holds
// in full: a long run's first lines go by reference, and are left out).
type childRun struct {
	path  string
	lines []TraceLine
}

// key names the interrupt across the sub-agents' runs.
func (ci ChildInterrupt) key() string { return ci.WorkflowID + "/" + ci.RunID + "/" + ci.Interrupt.ID }

// ErrSubAgent is the error type of a sub-agent call whose child run
// failed (or could not start): the call's recorded error.
const ErrSubAgent = "tulip.SubAgentFailed"

// agentPath is this run's agent path: its own agent, under its parent's.
func (r *run) agentPath() string {
	if r.in.Parent != nil && r.in.Parent.Path != "" {
		return r.in.Parent.Path
	}
	return r.in.Agent
}

// subThread is the thread of a sub-agent tool's runs: the caller's thread
// (or workflow, for a run on none), "/sub/" and the tool.
func (r *run) subThread(ctx wf.Context, tool string) string {
	base := r.in.ThreadID
	if base == "" {
		base = wf.GetInfo(ctx).WorkflowExecution.ID
	}
	return base + "/sub/" + tool
}

// launchSub starts a sub-agent call: a child workflow on the tool's
// thread, after the previous call of the same tool (a thread runs one run
// at a time). The returned future settles with the child's answer (a
// ToolOutput) or a tool error; while the child runs, its interrupts become
// this run's (relayInterrupt).
func (r *run) launchSub(ctx wf.Context, tool *activities.Tool, in activities.ToolInput, cr *childRun) wf.Future {
	out, settle := wf.NewFuture(ctx)
	sub := tool.SubAgent()
	var args activities.SubAgentArgs
	if err := json.Unmarshal([]byte(in.Arguments), &args); err != nil || args.Task == "" {
		settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf("sub-agent %s: give it a task (\"task\": text)", in.Tool), protocol.ErrArgumentDecode, nil))
		return out
	}
	thread := r.subThread(ctx, in.Tool)
	if r.subBusy == nil {
		r.subBusy, r.subRuns = map[string]wf.Future{}, map[string]string{}
	}
	prev := r.subBusy[thread]
	r.subBusy[thread] = out
	// The child's interrupts reach this call's coroutine alone (one
	// reader routes them by the child's workflow: the thread, which one
	// call at a time holds).
	r.routeChildSignals(ctx)
	interrupts := wf.NewBufferedChannel(ctx, 16)
	model := sub.Model
	if model == "" {
		model = r.in.Model
	}
	child := RunInput{TestEnv: r.in.TestEnv, Agent: sub.Agent, ThreadID: thread, Message: args.Task, Model: model, Hooks: sub.Hooks, Tools: sub.Tools, MaxTurns: sub.MaxTurns,
		Instructions: sub.Instructions, Parent: &ParentRef{WorkflowID: wf.GetInfo(ctx).WorkflowExecution.ID, Path: r.agentPath() + "/" + sub.Agent}}
	wf.Go(ctx, func(ctx wf.Context) {
		if prev != nil {
			_ = prev.Get(ctx, nil) // its outcome is its own call's
		}
		// Registered before the child starts: its first interrupt may
		// come in the same workflow task as its start.
		r.childChans[thread] = interrupts
		// The thread's last run, when this run started it; else the
		// child starts as a new thread (REJECT_DUPLICATE proves it, and
		// its load reads no listing, so waits out no lag) and, refused
		// (the thread has runs), as a continued one, which lists them.
		child.PreviousRunID = r.subRuns[thread]
		start := func(fresh bool) (wf.ChildWorkflowFuture, wf.Execution, error) {
			reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
			if child.NewThread = fresh; fresh {
				reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
			}
			cctx := wf.WithChildOptions(ctx, wf.ChildWorkflowOptions{WorkflowID: thread, TaskQueue: sub.TaskQueue,
				WorkflowIDReusePolicy: reuse,
				ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_TERMINATE,
				StaticSummary:         fmt.Sprintf("tulip sub-agent **%s** of %s", sub.Agent, r.agentPath())})
			cf := wf.ExecuteChildWorkflow(cctx, WorkflowName, child)
			var exec wf.Execution
			err := cf.GetChildWorkflowExecution().Get(ctx, &exec)
			return cf, exec, err
		}
		fresh := child.PreviousRunID == ""
		var cf wf.ChildWorkflowFuture
		var exec wf.Execution
		var err error
		if r.in.TestEnv && !fresh {
			err = errTestEnvThread(thread)
		} else {
			cf, exec, err = start(fresh)
		}
		var taken *temporal.ChildWorkflowExecutionAlreadyStartedError
		if fresh && errors.As(err, &taken) {
			if r.in.TestEnv {
				err = errTestEnvThread(thread)
			} else {
				cf, exec, err = start(false)
			}
		}
		var refused *temporal.ApplicationError
		if errors.As(err, &refused) && refused.Type() == protocol.ErrBadInput {
			delete(r.childChans, thread)
			settle.SetError(err)
			return
		}
		if err != nil {
			delete(r.childChans, thread)
			settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf("sub-agent %s did not start: %v", in.Tool, err), ErrSubAgent, nil))
			return
		}
		r.subRuns[thread] = exec.RunID
		for done := false; !done; {
			sel := wf.NewSelector(ctx)
			sel.AddFuture(cf, func(wf.Future) { done = true })
			sel.AddReceive(interrupts, func(ch wf.ReceiveChannel, _ bool) {
				var ci ChildInterrupt
				ch.Receive(ctx, &ci)
				key := ci.key()
				gone := func() bool { return cf.IsReady() || r.withdrawn[key] }
				if !gone() {
					r.relayInterrupt(ctx, ci, gone)
				}
			})
			sel.Select(ctx)
		}
		delete(r.childChans, thread)
		var res struct {
			Status string      `json:"status"`
			Answer string      `json:"answer"`
			Turns  int         `json:"turns"`
			Trace  []TraceLine `json:"trace"`
		}
		if err := cf.Get(ctx, &res); err != nil {
			settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf("sub-agent %s failed: %v", in.Tool, err), ErrSubAgent, nil))
			return
		}
		cr.path, cr.lines = child.Parent.Path, res.Trace
		b, _ := json.Marshal(activities.SubAgentResult{Answer: res.Answer, Thread: thread, Turns: res.Turns})
		settle.SetValue(activities.ToolOutput{Result: b})
	})
	return out
}

// routeChildSignals starts, once a run, the one reader of
// SignalChildInterrupt: it hands each to the channel of the call whose
// child sent it (by the child's workflow), and drops it when none waits.
func (r *run) routeChildSignals(ctx wf.Context) {
	if r.childChans != nil {
		return
	}
	r.childChans, r.withdrawn = map[string]wf.Channel{}, map[string]bool{}
	sig := wf.GetSignalChannel(ctx, SignalChildInterrupt)
	wf.Go(ctx, func(ctx wf.Context) {
		for {
			var ci ChildInterrupt
			if !sig.Receive(ctx, &ci) {
				return
			}
			if ci.Withdrawn {
				r.withdrawn[ci.key()] = true
				continue
			}
			if ch := r.childChans[ci.WorkflowID]; ch != nil && !ch.SendAsync(ci) {
				wf.GetLogger(ctx).Warn("a sub-agent's interrupt was dropped: too many at once", "sub-agent", ci.WorkflowID)
			}
		}
	})
}

// relayInterrupt raises a sub-agent's interrupt as this run's, waits for
// the resume that answers it, and forwards that resume to the child. gone
// reports the child closed: the interrupt is then withdrawn.
func (r *run) relayInterrupt(ctx wf.Context, ci ChildInterrupt, gone func() bool) {
	if err := wf.Await(ctx, func() bool { return r.interrupt == nil || gone() }); err != nil || gone() {
		return
	}
	it := ci.Interrupt
	r.interrupts++
	r.interrupt = &Interrupt{ID: fmt.Sprintf("int-%d", r.interrupts), Turn: r.turn, Hook: it.Hook,
		Reason: "sub-agent " + it.Agent + ": " + it.Reason, Held: it.Held, Agent: it.Agent}
	r.holdRerun = ci.Rerun
	resume, err := r.waitResumeUnless(ctx, it.Hook, gone, 0)
	if err != nil || resume == nil {
		return
	}
	fwd := ResumeInput{InterruptID: it.ID, Answer: resume.Answer, PerformDangling: resume.PerformDangling, Results: resume.Results}
	_ = wf.SignalExternalWorkflow(ctx, ci.WorkflowID, ci.RunID, SignalResume, fwd).Get(ctx, nil)
}

// tellWithdrawn, in a sub-agent's run, signals its parent that the
// interrupt id (relayed from its own sub-agent) is withdrawn.
func (r *run) tellWithdrawn(ctx wf.Context, id string) {
	r.signalParent(ctx, ChildInterrupt{Interrupt: Interrupt{ID: id}, Withdrawn: true})
}

// tellParent, in a sub-agent's run, signals its parent that the run is
// interrupted (a child on its own: nothing).
func (r *run) tellParent(ctx wf.Context) {
	if r.interrupt == nil {
		return
	}
	it := *r.interrupt
	if it.Agent == "" {
		it.Agent = r.agentPath()
	}
	r.signalParent(ctx, ChildInterrupt{Interrupt: it, Rerun: r.holdRerun})
}

// signalParent sends ci, from this run, to its parent's current run (a
// run with no parent: nothing).
func (r *run) signalParent(ctx wf.Context, ci ChildInterrupt) {
	p := r.in.Parent
	if p == nil {
		return
	}
	info := wf.GetInfo(ctx)
	ci.WorkflowID, ci.RunID = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	if err := wf.SignalExternalWorkflow(ctx, p.WorkflowID, "", SignalChildInterrupt, ci).Get(ctx, nil); err != nil {
		wf.GetLogger(ctx).Warn("the parent run was not told", "parent", p.WorkflowID, "withdrawn", ci.Withdrawn, "error", err)
	}
}

// errTestEnvThread refuses, in the SDK's test environment, a sub-agent
// call on a thread that has runs: loading it needs a server.
func errTestEnvThread(thread string) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"sub-agent thread %s has runs already: in the SDK's test environment (agent.RunTest) a sub-agent's thread runs once, since reading its earlier runs needs a server; test it on a dev server (docs/tour.md)", thread),
		protocol.ErrBadInput, nil)
}
