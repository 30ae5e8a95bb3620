package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// The seed's refund recipe, end to end on the embedded Temporal server:
// issue_refund and page_oncall are both idempotent; the model re-emits
// both, and each body runs once.
func Example_refundRecipe() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 1. Declare the tools. Their bodies count how often they really run.
	var refunds, pages atomic.Int32
	issueRefund := activities.MustTool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true},
		func(ctx context.Context, a struct {
			OrderID string  `json:"order_id"`
			Amount  float64 `json:"amount"`
		}) (map[string]any, error) {
			n := refunds.Add(1)
			return map[string]any{"refund_id": fmt.Sprintf("rf-%d", n), "order_id": a.OrderID}, nil
		})
	pageOncall := activities.MustTool(protocol.ToolSpec{Name: "page_oncall", Idempotent: true},
		func(ctx context.Context, a struct {
			CaseID  string `json:"case_id"`
			Summary string `json:"summary"`
		}) (string, error) {
			pages.Add(1)
			return "paged " + a.CaseID, nil
		})

	// 2. A model that retries "to be sure" (a real one would be an LLM).
	model := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		call := func(id, tool, args string) []threadstate.ToolCall {
			return []threadstate.ToolCall{{ID: id, Name: tool, Arguments: args}}
		}
		switch req.Turn {
		case 1:
			return activities.ModelResponse{ToolCalls: call("a", "issue_refund", `{"order_id": "ord-4821", "amount": 120.0}`)}, nil
		case 2: // the receipt looked ambiguous
			return activities.ModelResponse{ToolCalls: call("b", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`)}, nil
		case 3:
			return activities.ModelResponse{ToolCalls: call("c", "page_oncall", `{"case_id": "case-1", "summary": "refunded"}`)}, nil
		case 4:
			return activities.ModelResponse{ToolCalls: call("d", "page_oncall", `{"case_id": "case-1", "summary": "refunded"}`)}, nil
		}
		return activities.ModelResponse{Text: "Refunded and paged."}, nil
	})

	// 3. A worker with the tulip plugin.
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{
		Tools:  []*activities.Tool{issueRefund, pageOncall},
		Models: map[string]activities.Model{"support": model},
	})
	if err != nil {
		panic(err)
	}
	w := sdkworker.New(c, "refund-recipe", sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	if err := w.Start(); err != nil {
		panic(err)
	}
	defer w.Stop()

	// 4. Run the agent.
	_, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: "refund-recipe", Model: "support", Message: "Refund ord-4821"})
	if err != nil {
		panic(err)
	}
	for _, l := range res.Trace {
		var result any
		_ = json.Unmarshal(l.Result, &result)
		fmt.Printf("%s %s %s -> %v\n", l.CallID, l.Tool, l.Outcome, result)
	}
	fmt.Println(res.Answer)
	fmt.Printf("refund body ran %d time(s), page body %d time(s)\n", refunds.Load(), pages.Load())
	// Output:
	// a issue_refund executed -> map[order_id:ord-4821 refund_id:rf-1]
	// b issue_refund cached -> map[order_id:ord-4821 refund_id:rf-1]
	// c page_oncall executed -> paged case-1
	// d page_oncall cached -> paged case-1
	// Refunded and paged.
	// refund body ran 1 time(s), page body 1 time(s)
}

// A thread of two runs, scripted by one model (scenario.ThreadModel plays
// the i-th script in the thread's i-th run): the second run asks for the
// same refund, and the thread's log serves it.
func Example_threadModel() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var refunds atomic.Int32
	issueRefund := activities.MustTool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true},
		func(ctx context.Context, a map[string]any) (map[string]any, error) {
			return map[string]any{"refund_id": fmt.Sprintf("rf-%d", refunds.Add(1))}, nil
		})
	refund := []threadstate.ToolCall{{ID: "r1", Name: "issue_refund", Arguments: `{"order_id": "ord-4821", "amount": 120.0}`}}
	again := []threadstate.ToolCall{{ID: "r2", Name: "issue_refund", Arguments: `{"amount": 120, "order_id": "ord-4821"}`}}
	done := "done"
	model := scenario.ThreadModel(
		scenario.Run{Turns: []scenario.Turn{{ToolCalls: refund}, {Text: &done}}}, // the thread's first run
		scenario.Run{Turns: []scenario.Turn{{ToolCalls: again}, {Text: &done}}},  // its second
	)

	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: []*activities.Tool{issueRefund}, Models: map[string]activities.Model{"script": model}})
	if err != nil {
		panic(err)
	}
	w := sdkworker.New(c, "thread-model", sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	if err := w.Start(); err != nil {
		panic(err)
	}
	defer w.Stop()

	thread := fmt.Sprintf("customer-%d", time.Now().UnixNano())
	for range 2 {
		_, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: "thread-model", Model: "script", ThreadID: thread, Message: "refund ord-4821"})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Trace[0].CallID, res.Trace[0].Outcome)
	}
	fmt.Println("refund body ran", refunds.Load(), "time(s)")
	// Output:
	// r1 executed
	// r2 cached
	// refund body ran 1 time(s)
}
