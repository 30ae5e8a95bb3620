package agent_test

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// An agent tested in the SDK's test environment, in process and with no
// server: the model asks for the refund twice, the repeat is served from
// the log (the body runs once), and the page waits for an approval that
// the test gives.
func ExampleRunTest() {
	refunds := 0
	refund := tulip.MustTool(tulip.ToolSpec{Name: "issue_refund", Idempotent: true},
		func(ctx context.Context, a struct {
			OrderID string `json:"order_id"`
		}) (string, error) {
			refunds++
			return "refunded " + a.OrderID, nil
		})
	page := tulip.MustTool(tulip.ToolSpec{Name: "page_oncall"},
		func(ctx context.Context, a struct{}) (string, error) { return "paged", nil })
	model := tulip.ModelFunc(func(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		call := func(id, tool, args string) (tulip.ModelResponse, error) {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: id, Name: tool, Arguments: args}}}, nil
		}
		switch req.Turn { // 1 is the run's first response
		case 1:
			return call("a", "issue_refund", `{"order_id": "ord-1"}`)
		case 2: // "to be sure"
			return call("b", "issue_refund", `{"order_id": "ord-1"}`)
		case 3:
			return call("c", "page_oncall", `{}`)
		}
		return tulip.ModelResponse{Text: "Refunded."}, nil
	})
	plugin, err := tulip.NewPlugin(tulip.Options{
		Tools:  []tulip.Toolset{refund, page},
		Models: map[string]tulip.Model{"support": model},
		Hooks:  map[string]tulip.Hook{"approve-pages": tulip.Approve("page_oncall", "pages need a person")},
	})
	if err != nil {
		panic(err)
	}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler))) // quiet
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Plugins: []worker.Plugin{plugin}})
	res, err := agent.RunTest(env, agent.Options{Model: "support", Message: "refund ord-1", Hooks: []string{"approve-pages"}},
		func(in agent.Interrupt) agent.ResumeInput { return agent.Approve(in.ID) })
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Answer, "refunds:", refunds)
	for _, l := range res.Trace {
		fmt.Println(l.CallID, l.Tool, l.Outcome)
	}
	// Output:
	// completed Refunded. refunds: 1
	// a issue_refund executed
	// b issue_refund cached
	// c page_oncall held
	// c page_oncall dangling
}
