package tests

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// The README's tour, step by step, on the public API (package tulip and
// package agent, nothing else of tulip's) and the embedded Temporal server:
// tools, the plugin, a run whose model retries the refund "to be sure", an
// approval, and a thread's second run whose refund is served.
func Example_tour() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 1. Declare tools. The bodies count how often they really run.
	type refundArgs struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	var refunds, pages atomic.Int32
	var rerun atomic.Bool // the thread's second run
	issueRefund := tulip.MustTool(tulip.ToolSpec{Name: "issue_refund", Idempotent: true},
		func(ctx context.Context, a refundArgs) (string, error) {
			_ = tulip.IdempotencyKey(ctx) // send it to the payment provider
			return fmt.Sprintf("rf-%d for %s", refunds.Add(1), a.OrderID), nil
		})
	pageOncall := tulip.MustTool(tulip.ToolSpec{Name: "page_oncall"},
		func(ctx context.Context, a struct {
			Summary string `json:"summary"`
		}) (string, error) {
			pages.Add(1)
			return "paged", nil
		})

	// A model that retries "to be sure" (a real one is an LLM:
	// package openaimodel).
	model := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		call := func(id, tool, args string) tulip.ModelResponse {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: id, Name: tool, Arguments: args}}}
		}
		first := req.Messages[len(req.Messages)-1].Role == "user"
		switch {
		case req.Turn == 1 && first:
			return call("a", "issue_refund", `{"order_id": "ord-4821", "amount": 120.0}`), nil
		case req.Turn == 2 && req.Thread != "" && !rerun.Load(): // the receipt looked ambiguous
			return call("b", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`), nil
		case req.Turn == 3:
			return call("c", "page_oncall", `{"summary": "refunded ord-4821"}`), nil
		}
		return tulip.ModelResponse{Text: "Refunded."}, nil
	})

	// 2. A worker with the plugin.
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	plugin, err := tulip.NewPlugin(tulip.Options{
		Tools:  []tulip.Toolset{issueRefund, pageOncall},
		Hooks:  map[string]tulip.Hook{"approve_pages": tulip.Approve("page_oncall", "paging needs a person")},
		Models: map[string]tulip.Model{"support": model},
	})
	if err != nil {
		panic(err)
	}
	w := worker.New(c, "tour", worker.Options{Plugins: []worker.Plugin{plugin}})
	if err := w.Start(); err != nil {
		panic(err)
	}
	defer w.Stop()

	// 3. Run an agent on a thread. Its page waits for approval.
	thread := fmt.Sprintf("customer-%d", time.Now().UnixNano())
	run, err := agent.Start(ctx, c, agent.Options{TaskQueue: "tour", Model: "support", ThreadID: thread,
		Hooks: []string{"approve_pages"}, Message: "Please refund order ord-4821"})
	if err != nil {
		panic(err)
	}
	res, err := run.Await(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Interrupt.Reason)
	if _, err := run.Resume(ctx, agent.Approve(res.Interrupt.ID)); err != nil {
		panic(err)
	}
	res, err = run.Await(ctx)
	if err != nil {
		panic(err)
	}
	for _, l := range res.Trace {
		fmt.Println(l.Tool, l.Outcome)
	}
	fmt.Println(res.Status, res.Answer)

	// 4. The thread's next run: the same refund is served from its log.
	rerun.Store(true)
	run, err = agent.Start(ctx, c, agent.Options{TaskQueue: "tour", Model: "support", ThreadID: thread,
		Message: "Did the refund go through?"})
	if err != nil {
		panic(err)
	}
	if res, err = run.Await(ctx); err != nil {
		panic(err)
	}
	fmt.Println(res.Trace[0].Tool, res.Trace[0].Outcome, res.Trace[0].Outcome == agent.Cached)
	log, err := agent.ThreadLog(ctx, c, thread, "")
	if err != nil {
		panic(err)
	}
	fmt.Printf("log %d records; refund ran %d time(s), page %d\n", len(log), refunds.Load(), pages.Load())
	// Output:
	// interrupted paging needs a person
	// issue_refund executed
	// issue_refund cached
	// page_oncall held
	// page_oncall dangling
	// completed Refunded.
	// issue_refund cached true
	// log 3 records; refund ran 1 time(s), page 1
}
