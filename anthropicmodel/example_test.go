package anthropicmodel_test

import (
	"context"
	"fmt"
	"os"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/anthropicmodel"
	"github.com/tulip-temporal/tulip/anthropicmodel/anthropictest"
)

// A model against a loopback Messages API: the answer's tool_use block is
// a tulip tool call.
func Example() {
	srv := anthropictest.New(anthropictest.ToolUse("toolu_1", "issue_refund", `{"order_id":"ord-1","amount":120.0}`))
	defer srv.Close()
	os.Setenv("ANTHROPIC_API_KEY", "sk-ant-example") // on a worker: its environment
	m, err := anthropicmodel.New(anthropicmodel.Options{Model: "claude-sonnet-4-5", BaseURL: srv.URL})
	if err != nil {
		panic(err)
	}
	res, err := m.Respond(context.Background(), tulip.ModelRequest{
		Messages: []tulip.Message{{Role: "user", Content: "Please refund ord-1"}},
		Tools:    []tulip.ToolSpec{{Name: "issue_refund"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ToolCalls[0].Name, res.ToolCalls[0].Arguments)
	// Output: issue_refund {"order_id":"ord-1","amount":120.0}
}
