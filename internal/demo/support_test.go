package demo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

func TestSupportModel(t *testing.T) {
	m := SupportModel()
	ask := func(msgs ...threadstate.Message) activities.ModelResponse {
		resp, err := m.Respond(context.Background(), activities.ModelRequest{Messages: msgs})
		require.NoError(t, err)
		return resp
	}
	user := func(s string) threadstate.Message { return threadstate.Message{Role: "user", Content: s} }
	resp := ask(user("Please refund ord-4821 and isolate web-1, then page case-9; mint one too"))
	var names, args []string
	for _, c := range resp.ToolCalls {
		names, args = append(names, c.Name), append(args, c.Arguments)
	}
	assert.Equal(t, []string{"issue_refund", "isolate_host", "page_oncall", "mint_case_id"}, names)
	assert.Equal(t, `{"amount":120.0,"order_id":"ord-4821"}`, args[0])
	assert.Equal(t, `{"host":"web-1"}`, args[1])

	// "order" may come between the verb and the order id.
	resp = ask(user("Please refund order ord-4821, then lookup order ord-4821"))
	require.Len(t, resp.ToolCalls, 2)
	assert.Equal(t, `{"amount":120.0,"order_id":"ord-4821"}`, resp.ToolCalls[0].Arguments)
	assert.Equal(t, `{"order_id":"ord-4821"}`, resp.ToolCalls[1].Arguments)

	resp = ask(user("refund ord-7 55.5"))
	assert.Equal(t, `{"amount":55.5,"order_id":"ord-7"}`, resp.ToolCalls[0].Arguments)

	resp = ask(user("refund ord-7"), activities.AssistantMessage(resp),
		threadstate.Message{Role: "tool", ToolCallID: "x", Content: `{"refund_id":"rf-1"}`, Served: true})
	assert.Contains(t, resp.Text, `{"refund_id":"rf-1"} (served from the log`)

	resp = ask(user("hello"))
	assert.Empty(t, resp.ToolCalls)
	assert.Contains(t, resp.Text, "refund ord-N")

	// After a resume: the held call's result, then the answer.
	resp = ask(user("isolate web-1"), threadstate.Message{Role: "assistant"},
		threadstate.Message{Role: "tool", ToolCallID: "c", Content: `{"isolated":"web-1"}`}, user("approved"))
	assert.Equal(t, `Done: {"isolated":"web-1"}`, resp.Text)
}
