package agent

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// RunTest plays a run in the SDK's test environment, in process and in
// virtual time, and returns its result: env is a
// testsuite.TestWorkflowEnvironment whose worker options carry tulip's
// plugin (env.SetWorkerOptions(worker.Options{Plugins: ...})). Tools,
// models, hooks and the log work as on a worker, and a served call starts
// no activity.
//
// answer answers each interrupt, and RunTest sends the answer by update.
// With a nil answer RunTest answers none: a resume the test sends itself
// (env.SignalWorkflow("tulip.resume", ...) from env.RegisterDelayedCallback)
// continues the run, and a run nobody resumes comes back as its first
// interrupt left it (Status Interrupted).
//
// The environment holds no server: a run on a thread (opts.ThreadID) is
// refused (tulip.BadInput), since it loads the thread through the
// server's visibility; test threads on a dev server (docs/tour.md).
// Sub-agents (tulip.AgentTool) run, as child workflows of the
// environment: each sub-agent's thread starts new, and a second call of
// one that would continue its thread fails that call with kind BadInput.
func RunTest(env *testsuite.TestWorkflowEnvironment, opts Options, answer func(Interrupt) ResumeInput) (*Result, error) {
	if opts.ThreadID != "" {
		return nil, &runclient.TestEnvError{Field: "ThreadID", Why: "a thread's run loads its earlier runs through the server's visibility, which the test environment has not: test threads on a dev server (docs/tour.md)"}
	}
	if opts.Model == "" {
		return nil, &runclient.OptionError{Field: "Model"}
	}
	answered := map[string]bool{}
	var unanswered *Result // the first interrupt nobody answered
	var poll func()
	poll = func() {
		if env.IsWorkflowCompleted() {
			return
		}
		if v, err := env.QueryWorkflow(agentrun.QueryState); err == nil {
			var st Result
			if v.Get(&st) == nil && st.Status == agentrun.StatusInterrupted && st.Interrupt != nil && !answered[st.Interrupt.ID] {
				if answer == nil {
					unanswered = &st
					return // no more polls: the test resumes, or the run waits
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
	in := runclient.Input(opts.runOptions())
	in.TestEnv = true
	env.ExecuteWorkflow(agentrun.WorkflowName, in)
	if !env.IsWorkflowCompleted() && unanswered != nil {
		return unanswered, nil
	}
	if err := env.GetWorkflowError(); err != nil {
		if unanswered != nil && temporal.IsTimeoutError(err) {
			return unanswered, nil // the environment's run timeout ended the wait
		}
		return nil, err
	}
	var res Result
	if err := env.GetWorkflowResult(&res); err != nil {
		return nil, err
	}
	return &res, nil
}
