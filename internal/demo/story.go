package demo

import (
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

func call(id, tool, args string) threadstate.ToolCall {
	return threadstate.ToolCall{ID: id, Name: tool, Arguments: args}
}

func text(s string) *string { return &s }

// RefundStory is the demo: a support agent refunds order ord-4821, is unsure
// of the receipt and refunds again "to be sure", mints two case ids, pages
// on-call twice (once twice in one response), and a later run on the same
// thread re-issues the refund. Only the first refund and the first page run
// their bodies.
func RefundStory() *scenario.Scenario {
	refund := `{"order_id": "ord-4821", "amount": 120.0}`
	page := `{"case_id": "case-1", "summary": "refund issued for ord-4821"}`
	return &scenario.Scenario{Runs: []scenario.Run{
		{Agent: "support", ThreadID: "customer-4821", Turns: []scenario.Turn{
			{ToolCalls: []threadstate.ToolCall{call("call-1", "issue_refund", refund)}},
			// The receipt looked ambiguous: the model retries, with 120 and
			// another key order. Across turns that is the same call.
			{ToolCalls: []threadstate.ToolCall{call("call-2", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`)}},
			{ToolCalls: []threadstate.ToolCall{call("call-3", "lookup_order", `{"order_id": "ord-4821"}`)}},
			{ToolCalls: []threadstate.ToolCall{call("call-4", "mint_case_id", `{}`)}},
			{ToolCalls: []threadstate.ToolCall{call("call-5", "mint_case_id", `{}`)}},
			{ToolCalls: []threadstate.ToolCall{call("call-6", "page_oncall", page), call("call-7", "page_oncall", page)}},
			{ToolCalls: []threadstate.ToolCall{call("call-8", "page_oncall", page)}},
			{Text: text("Refunded 120.00 on ord-4821 (rf-1); on-call paged about case-1.")},
		}},
		// A new run on the same thread reloads the checkpoint: the refund
		// is already in the log.
		{Agent: "support", ThreadID: "customer-4821", Turns: []scenario.Turn{
			{ToolCalls: []threadstate.ToolCall{call("call-9", "issue_refund", refund)}},
			{Text: text("The refund for ord-4821 was already issued.")},
		}},
	}}
}
