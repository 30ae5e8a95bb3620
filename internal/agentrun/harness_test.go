package agentrun_test

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

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// memCheckpointer keeps thread checkpoints in memory: test environments
// have no Temporal server to keep them in run results.
type memCheckpointer struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

func (c *memCheckpointer) Load(_ context.Context, ref threadstate.ThreadRef) (*threadstate.Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[ref.ThreadID]
	if !ok {
		return nil, nil
	}
	var cp threadstate.Checkpoint
	return &cp, json.Unmarshal(b, &cp)
}

func (c *memCheckpointer) Save(_ context.Context, ref threadstate.ThreadRef, cp *threadstate.Checkpoint) error {
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
	opts func(*workerplugin.Options)
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, tb: demo.NewToolbox(), cps: &memCheckpointer{}}
}

type runOut struct {
	res    agentrun.RunResult
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
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{workerplugin.NewInterceptor()}})
	opts := workerplugin.Options{Tools: h.tb.Tools(), Hooks: demo.Hooks(), Models: sc.Models("t"), Checkpointer: h.cps}
	if h.opts != nil {
		h.opts(&opts)
	}
	require.NoError(h.t, workerplugin.Register(env, opts))
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
			v, err := env.QueryWorkflow(agentrun.QueryState)
			require.NoError(h.t, err)
			var st agentrun.StateView
			require.NoError(h.t, v.Get(&st))
			if st.Status == agentrun.StatusInterrupted && len(resumes) > 0 {
				next := resumes[0]
				resumes = resumes[1:]
				env.UpdateWorkflow(agentrun.UpdateResume, "", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { h.t.Errorf("resume rejected: %v", err) },
				}, agentrun.ResumeInput{InterruptID: st.Interrupt.ID, Answer: next.Answer, PerformDangling: next.PerformDangling})
			}
			if polls < 20 {
				env.RegisterDelayedCallback(poll, time.Second)
			}
		}
		env.RegisterDelayedCallback(poll, time.Second)
		env.ExecuteWorkflow(agentrun.WorkflowName, agentrun.RunInput{
			Agent: run.Agent, ThreadID: run.ThreadID, Model: scenario.ModelName("t", i), Hooks: run.Hooks,
		})
		out := runOut{}
		switch {
		case !env.IsWorkflowCompleted():
			v, err := env.QueryWorkflow(agentrun.QueryState)
			require.NoError(h.t, err)
			require.NoError(h.t, v.Get(&out.res))
			out.status = agentrun.StatusInterrupted
		case env.GetWorkflowError() != nil:
			out.err = env.GetWorkflowError()
			out.status = agentrun.StatusFailed
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
