package agentrun_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/scenario"
)

func errType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// A resume with nothing to resume is refused by the update's validator; a
// stale interrupt id is refused; a resume delivered twice takes effect once;
// the signal path shares the handler.
func TestResumeValidation(t *testing.T) {
	sc := parseScenario(t, `{"runs": [{"hooks": ["approve_isolate_host"], "turns": [
		{"tool_calls": [{"id": "c1", "name": "isolate_host", "arguments": "{\"host\": \"a\"}"}]}],
		"resumes": [{"answer": "scripted", "turns": [
			{"tool_calls": [{"id": "c2", "name": "isolate_host", "arguments": "{\"host\": \"b\"}"}]}]}]
	}]}`)
	h := newHarness(t)
	env := h.env(sc)
	var rejected []string
	var results []agentrun.ResumeResult
	cb := func() *testsuite.TestUpdateCallback {
		return &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = append(rejected, errType(err)) },
			OnComplete: func(v any, err error) {
				if r, ok := v.(agentrun.ResumeResult); ok {
					results = append(results, r)
				}
			},
		}
	}
	n := 0
	resume := func(id string, dangling bool) func() {
		return func() {
			n++
			env.UpdateWorkflow(agentrun.UpdateResume, fmt.Sprintf("u%d", n), cb(), agentrun.ResumeInput{InterruptID: id, Answer: "ok", PerformDangling: dangling})
		}
	}
	// Before the first model turn completes: not interrupted.
	env.RegisterDelayedCallback(resume("", true), 0)
	// At t=1s the run waits on int-1: a stale id, then the answer. At t=2s
	// it waits on int-2: the int-1 answer again (a duplicate), then a resume
	// signal for int-2.
	env.RegisterDelayedCallback(resume("int-7", true), time.Second)
	env.RegisterDelayedCallback(resume("int-1", true), time.Second+time.Millisecond)
	env.RegisterDelayedCallback(func() {
		resume("int-1", true)() // the same answer again: a duplicate
		env.SignalWorkflow(agentrun.SignalResume, agentrun.ResumeInput{InterruptID: "int-2", Answer: "fine", PerformDangling: false})
	}, 2*time.Second)
	env.ExecuteWorkflow(agentrun.WorkflowName, agentrun.RunInput{Model: scenario.ModelName("t", 0), Hooks: []string{"approve_isolate_host"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{protocol.ErrNotInterrupted, protocol.ErrStaleInterrupt}, rejected)
	require.Len(t, results, 2)
	assert.Equal(t, agentrun.ResumeResult{InterruptID: "int-1"}, results[0])
	assert.Equal(t, agentrun.ResumeResult{InterruptID: "int-1", Duplicate: true}, results[1])
	var res agentrun.RunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	got := byCall(linesOf(res))
	assert.Equal(t, agentrun.OutcomeDangling, got["c1"].Outcome)
	assert.Equal(t, agentrun.OutcomeDropped, got["c2"].Outcome, "the signal answered int-2 without dangling calls")
	assert.Equal(t, 1, h.tb.Invocations()["isolate_host"])
}

func linesOf(res agentrun.RunResult) []scenario.Line {
	var out []scenario.Line
	for _, l := range res.Trace {
		out = append(out, scenario.Line{Run: 1, TraceLine: l})
	}
	return out
}

// Hooks can be installed on a running run by update or by signal (both are
// in history, so replay sees them); an unknown hook is refused by the
// update's validator. (That a hook sees only later calls is the
// hook-is-not-retroactive conformance case.)
func TestHooksMidRun(t *testing.T) {
	sc := parseScenario(t, `{"runs": [{"turns": [
		{"tool_calls": [{"id": "c1", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"}]},
		{"tool_calls": [{"id": "c2", "name": "page_oncall", "arguments": "{\"case_id\": \"k2\", \"summary\": \"s\"}"}]},
		{"tool_calls": [{"id": "c3", "name": "issue_refund", "arguments": "{\"order_id\": \"o\", \"amount\": 1}"}]}
	]}]}`)
	h := newHarness(t)
	env := h.env(sc)
	var rejected []string
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(agentrun.UpdateHooks, "h1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = append(rejected, errType(err)) },
		}, agentrun.HooksInput{Install: []string{"no_such_hook"}})
		env.UpdateWorkflow(agentrun.UpdateHooks, "h2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("refused: %v", err) },
		}, agentrun.HooksInput{Install: []string{"block_page_oncall"}})
		env.SignalWorkflow(agentrun.SignalHooks, agentrun.HooksInput{Install: []string{"upper_order_id"}})
	}, 0)
	env.ExecuteWorkflow(agentrun.WorkflowName, agentrun.RunInput{Model: scenario.ModelName("t", 0)})
	require.NoError(t, env.GetWorkflowError())
	var res agentrun.RunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	got := byCall(linesOf(res))
	assert.Equal(t, []string{protocol.ErrUnknownHook}, rejected)
	assert.Equal(t, agentrun.OutcomeCancelled, got["c1"].Outcome)
	assert.Equal(t, agentrun.OutcomeCancelled, got["c2"].Outcome)
	assert.JSONEq(t, `{"order_id": "O", "amount": 1}`, string(got["c3"].Arguments))
}
