package agent_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// An agent with an approval hook in the SDK's test environment: the
// refund runs, its identical repeat is served from the log (no second
// body run), and the page is held for approval and resumed by update (a
// resumed run executes without matching: rules.md).
func TestRunTest(t *testing.T) {
	ran := 0
	refund := tulip.MustTool(tulip.ToolSpec{Name: "issue_refund", Idempotent: true}, func(ctx context.Context, a struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		ran++
		return "refunded " + a.OrderID, nil
	})
	paged := 0
	page := tulip.MustTool(tulip.ToolSpec{Name: "page_oncall"}, func(ctx context.Context, a struct {
		Note string `json:"note"`
	}) (string, error) {
		paged++
		return "paged", nil
	})
	call := func(id string) tulip.ModelResponse {
		return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: id, Name: "issue_refund", Arguments: `{"order_id":"o1"}`}}}
	}
	model := tulip.ModelFunc(func(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		switch req.Turn {
		case 1:
			return call("c1"), nil
		case 2:
			return call("c2"), nil
		case 3:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "p1", Name: "page_oncall", Arguments: `{"note":"refunded o1"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "done"}, nil
	})
	plugin, err := tulip.NewPlugin(tulip.Options{Tools: []tulip.Toolset{refund, page}, Models: map[string]tulip.Model{"m": model},
		Hooks: map[string]tulip.Hook{"approve": tulip.Approve("page_oncall", "a person approves pages")}})
	require.NoError(t, err)

	for _, by := range []string{"update", "signal"} {
		t.Run(by, func(t *testing.T) {
			ran, paged = 0, 0
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			env := suite.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{Plugins: []worker.Plugin{plugin}})
			started := map[string]int{}
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				started[info.ActivityType.Name]++
			})
			asked := 0
			answer := func(in agent.Interrupt) agent.ResumeInput { asked++; return agent.Approve(in.ID) }
			if by == "signal" {
				// No answer: RunTest leaves the interrupt to a resume sent
				// by signal, an hour of virtual time later.
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow("tulip.state")
					require.NoError(t, err)
					var st agent.Result
					require.NoError(t, v.Get(&st))
					require.Equal(t, agent.Interrupted, st.Status)
					env.SignalWorkflow("tulip.resume", agent.Approve(st.Interrupt.ID))
					asked++
				}, time.Hour)
				answer = nil
			}
			res, err := agent.RunTest(env, agent.Options{Model: "m", Message: "refund o1", Hooks: []string{"approve"}}, answer)
			require.NoError(t, err)
			assert.Equal(t, agent.Completed, res.Status)
			assert.Equal(t, "done", res.Answer)
			assert.Equal(t, 1, asked)
			assert.Equal(t, 1, ran, "the repeat was served")
			assert.Equal(t, 1, paged, "the page ran once, after its approval")
			assert.Equal(t, 1, started["tulip.tool.issue_refund"], "the served repeat scheduled no activity")
			assert.Equal(t, 1, started["tulip.tool.page_oncall"])
			var outcomes []string
			for _, l := range res.Trace {
				outcomes = append(outcomes, l.CallID+":"+string(l.Outcome))
			}
			assert.Equal(t, []string{"c1:executed", "c2:cached", "p1:held", "p1:dangling"}, outcomes, "the page was held, then performed by the resume")
		})
	}

	// Without an answer the interrupted run comes back as it stands.
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Plugins: []worker.Plugin{plugin}})
	res, err := agent.RunTest(env, agent.Options{Model: "m", Message: "refund o1", Hooks: []string{"approve"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, agent.Interrupted, res.Status)
	require.NotNil(t, res.Interrupt)
	assert.Equal(t, "approve", res.Interrupt.Hook)

	// A thread's run needs the server's visibility: refused in one line.
	_, err = agent.RunTest(suite.NewTestWorkflowEnvironment(), agent.Options{Model: "m", ThreadID: "t1"}, nil)
	assert.True(t, tulip.Is(err, tulip.BadInput), "%v", err)
	t.Log(err)
}

// The tour's "Test your agent" quotes ExampleRunTest: every line of its
// code block is in the example, in order.
func TestTourQuotesRunTest(t *testing.T) {
	tour, err := os.ReadFile("../docs/tour.md")
	require.NoError(t, err)
	example, err := os.ReadFile("testenv_example_test.go")
	require.NoError(t, err)
	sec := string(tour)[strings.Index(string(tour), "## Test your agent"):]
	block := sec[strings.Index(sec, "```go\n")+6:]
	block = block[:strings.Index(block, "```")]
	rest := string(example)
	n := 0
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		i := strings.Index(rest, line)
		require.GreaterOrEqual(t, i, 0, "the tour's line is not in ExampleRunTest (in order): %s", line)
		rest = rest[i+len(line):]
		n++
	}
	assert.Greater(t, n, 4, "sanity: the block is read")
}

// A sub-agent in the SDK's test environment: the parent hands the refund
// to the "refunds" sub-agent, which runs as a child workflow of the
// environment and refunds once; its identical repeat (the tool is
// idempotent) is served from the parent's log. A second, different task
// would continue the sub-agent's thread, which needs a server: that call
// fails with kind BadInput, and the run answers. Before, the child's
// thread load asked the environment's mock service (DescribeNamespace)
// and killed the test binary.
func TestRunTestWithASubAgent(t *testing.T) {
	ran := 0
	refund := tulip.MustTool(tulip.ToolSpec{Name: "issue_refund"}, func(ctx context.Context, a struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		ran++
		return "refunded " + a.OrderID, nil
	})
	refunds, err := tulip.AgentTool(tulip.ToolSpec{Name: "refunds", Idempotent: true}, tulip.AgentToolOptions{Model: "sub",
		Tools: []string{"issue_refund"}})
	require.NoError(t, err)
	task := func(id, order string) tulip.ModelResponse {
		return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: id, Name: "refunds", Arguments: `{"task":"` + order + `"}`}}}
	}
	var last string
	parent := tulip.ModelFunc(func(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		switch req.Turn {
		case 1:
			return task("p1", "o1"), nil
		case 2:
			return task("p2", "o1"), nil
		case 3:
			return task("p3", "o2"), nil
		}
		last = req.Messages[len(req.Messages)-1].Content
		return tulip.ModelResponse{Text: "done"}, nil
	})
	sub := tulip.ModelFunc(func(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if req.Turn == 1 {
			order := req.Messages[len(req.Messages)-1].Content
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "s1", Name: "issue_refund", Arguments: `{"order_id":"` + order + `"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "refunded"}, nil
	})
	plugin, err := tulip.NewPlugin(tulip.Options{Tools: []tulip.Toolset{refund, refunds}, Models: map[string]tulip.Model{"m": parent, "sub": sub}})
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Plugins: []worker.Plugin{plugin}})
	res, err := agent.RunTest(env, agent.Options{Model: "m", Message: "refund o1", Tools: []string{"refunds"}}, nil)
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Equal(t, 1, ran, "one refund, by the sub-agent")
	var outcomes []string
	for _, l := range res.Trace {
		outcomes = append(outcomes, l.CallID+":"+string(l.Outcome))
	}
	assert.Equal(t, []string{"p1:executed", "p2:cached", "p3:executed"}, outcomes)
	assert.Contains(t, last, "test environment", "the third call's error names why")
}
