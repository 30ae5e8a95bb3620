package agent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
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

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Plugins: []worker.Plugin{plugin}})
	started := map[string]int{}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		started[info.ActivityType.Name]++
	})
	asked := 0
	res, err := agent.RunTest(env, agent.Options{Model: "m", Message: "refund o1", Hooks: []string{"approve"}},
		func(in agent.Interrupt) agent.ResumeInput { asked++; return agent.Approve(in.ID) })
	require.NoError(t, err)
	assert.Equal(t, agent.Completed, res.Status)
	assert.Equal(t, "done", res.Answer)
	assert.Equal(t, 1, asked)
	assert.Equal(t, 1, ran, "the repeat was served")
	assert.Equal(t, 1, paged, "the page ran once, after its approval")
	assert.Equal(t, 1, started["tulip.tool.issue_refund"], "the served repeat scheduled no activity")

	_, err = agent.RunTest(suite.NewTestWorkflowEnvironment(), agent.Options{Model: "m", ThreadID: "t1"}, nil)
	assert.ErrorContains(t, err, "test threads against a dev server")
	var outcomes []string
	for _, l := range res.Trace {
		outcomes = append(outcomes, l.CallID+":"+string(l.Outcome))
	}
	t.Log(outcomes)
	assert.Contains(t, outcomes, "c2:cached")
}
