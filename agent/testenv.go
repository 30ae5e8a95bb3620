package agent

import (
	"errors"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// RunTest plays a run in the SDK's test environment, in process and in
// virtual time: env is a testsuite.TestWorkflowEnvironment whose worker
// options carry tulip's plugin (env.SetWorkerOptions(worker.Options{Plugins:
// ...})). answer answers each interrupt (resumed by update; nil: none,
// and RunTest returns the interrupted result). The environment holds one
// run and no server: a run on a thread (opts.ThreadID) is refused, since
// its load reads the server's visibility; test threads against a dev
// server (docs/tour.md).
func RunTest(env *testsuite.TestWorkflowEnvironment, opts Options, answer func(Interrupt) ResumeInput) (*Result, error) {
	if opts.ThreadID != "" {
		return nil, errors.New("agent: RunTest: a run on a thread loads it from the server's visibility, which the test environment does not have: test threads against a dev server")
	}
	if opts.Model == "" {
		return nil, &runclient.OptionError{Field: "Model"}
	}
	answered := map[string]bool{}
	var poll func()
	poll = func() {
		if env.IsWorkflowCompleted() {
			return
		}
		v, err := env.QueryWorkflow(agentrun.QueryState)
		if err == nil {
			var st agentrun.StateView
			if v.Get(&st) == nil && st.Status == agentrun.StatusInterrupted && st.Interrupt != nil && !answered[st.Interrupt.ID] {
				if answer == nil {
					return // the run waits: ExecuteWorkflow returns
				}
				answered[st.Interrupt.ID] = true
				env.UpdateWorkflow(agentrun.UpdateResume, st.Interrupt.ID, &testsuite.TestUpdateCallback{
					OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {},
				}, answer(*st.Interrupt))
			}
		}
		env.RegisterDelayedCallback(poll, time.Second)
	}
	env.RegisterDelayedCallback(poll, time.Second)
	env.ExecuteWorkflow(agentrun.WorkflowName, runclient.Input(opts.runOptions()))
	if !env.IsWorkflowCompleted() {
		v, err := env.QueryWorkflow(agentrun.QueryState)
		if err != nil {
			return nil, err
		}
		var st agentrun.StateView
		if err := v.Get(&st); err != nil {
			return nil, err
		}
		return &Result{Status: st.Status, Interrupt: st.Interrupt, Trace: st.Trace}, nil
	}
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var res Result
	if err := env.GetWorkflowResult(&res); err != nil {
		return nil, err
	}
	return &res, nil
}
