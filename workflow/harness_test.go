package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/demo"
	"github.com/tulip-temporal/tulip/scenario"
	tworker "github.com/tulip-temporal/tulip/worker"
	"github.com/tulip-temporal/tulip/workflow"
)

// memCheckpointer keeps thread checkpoints in memory: test environments
// have no Temporal server to keep them in run results.
type memCheckpointer struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

func (c *memCheckpointer) Load(_ context.Context, ref activities.ThreadRef) (*activities.Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[ref.ThreadID]
	if !ok {
		return nil, nil
	}
	var cp activities.Checkpoint
	return &cp, json.Unmarshal(b, &cp)
}

func (c *memCheckpointer) Save(_ context.Context, ref activities.ThreadRef, cp *activities.Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(cp)
	if c.m == nil {
		c.m = map[string]json.RawMessage{}
	}
	c.m[ref.ThreadID] = b
	return err
}

// harness plays scenarios in the SDK's test environment, with the dedup
// interceptor installed by hand (test environments run no plugins).
type harness struct {
	t   *testing.T
	tb  *demo.Toolbox
	cps *memCheckpointer
	// opts may adjust the worker options (tools, hooks, models).
	opts func(*tworker.Options)
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, tb: demo.NewToolbox(), cps: &memCheckpointer{}}
}

type runOut struct {
	res    workflow.RunResult
	err    error
	status string
}

// env makes a test environment for one run of sc.
func (h *harness) env(sc *scenario.Scenario) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	var w io.Writer = io.Discard
	if os.Getenv("TULIP_TEST_LOG") != "" {
		w = os.Stderr
	}
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(w, nil))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{tworker.NewInterceptor()}})
	opts := tworker.Options{Tools: h.tb.Tools(), Hooks: demo.Hooks(), Models: sc.Models("t"), Checkpointer: h.cps}
	if h.opts != nil {
		h.opts(&opts)
	}
	require.NoError(h.t, tworker.Register(env, opts))
	return env
}

// play runs every run of sc and returns the trace and summary.
func (h *harness) play(sc *scenario.Scenario) ([]scenario.Line, scenario.Summary, []runOut) {
	var lines []scenario.Line
	var outs []runOut
	sum := scenario.Summary{}
	for i, run := range sc.Runs {
		env := h.env(sc)
		id := fmt.Sprintf("run-%d", i+1)
		if run.ThreadID != "" {
			id = run.ThreadID
		}
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		resumes := run.Resumes
		polls := 0
		var poll func()
		poll = func() {
			polls++
			v, err := env.QueryWorkflow(workflow.QueryState)
			require.NoError(h.t, err)
			var st workflow.StateView
			require.NoError(h.t, v.Get(&st))
			if st.Status == workflow.StatusInterrupted && len(resumes) > 0 {
				next := resumes[0]
				resumes = resumes[1:]
				env.UpdateWorkflow(workflow.UpdateResume, "", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { h.t.Errorf("resume rejected: %v", err) },
				}, workflow.ResumeInput{InterruptID: st.Interrupt.ID, Answer: next.Answer, PerformDangling: next.PerformDangling})
			}
			if polls < 20 {
				env.RegisterDelayedCallback(poll, time.Second)
			}
		}
		env.RegisterDelayedCallback(poll, time.Second)
		env.ExecuteWorkflow(workflow.WorkflowName, workflow.RunInput{
			Agent: run.Agent, ThreadID: run.ThreadID, Model: scenario.ModelName("t", i), Hooks: run.Hooks,
		})
		out := runOut{}
		switch {
		case !env.IsWorkflowCompleted():
			v, err := env.QueryWorkflow(workflow.QueryState)
			require.NoError(h.t, err)
			require.NoError(h.t, v.Get(&out.res))
			out.status = workflow.StatusInterrupted
		case env.GetWorkflowError() != nil:
			out.err = env.GetWorkflowError()
			out.status = workflow.StatusFailed
		default:
			require.NoError(h.t, env.GetWorkflowResult(&out.res))
			out.status = out.res.Status
		}
		for _, l := range out.res.Trace {
			lines = append(lines, scenario.Line{Run: i + 1, TraceLine: l})
		}
		sum.Runs = append(sum.Runs, scenario.RunStatus{Run: i + 1, WorkflowID: id, Status: out.status})
		outs = append(outs, out)
	}
	sum.BodyInvocations = h.tb.Invocations()
	return lines, sum, outs
}

func parseScenario(t *testing.T, text string) *scenario.Scenario {
	t.Helper()
	hooks := demo.Hooks()
	sc, err := scenario.Parse([]byte(text), func(h string) bool { _, ok := hooks[h]; return ok })
	require.NoError(t, err)
	return sc
}
