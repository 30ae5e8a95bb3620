package openaimodel_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// A model behind any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM,
// ...). Here a loopback server answers with a tool call, as a model asked
// for a refund would.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices": [{"message": {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
			"function": {"name": "issue_refund", "arguments": "{\"order_id\": \"ord-4821\", \"amount\": 120.0}"}}]}}]}`)
	}))
	defer srv.Close()

	model, err := openaimodel.New(openaimodel.Options{BaseURL: srv.URL, Model: "gpt-4o-mini"})
	if err != nil {
		panic(err)
	}
	resp, err := model.Respond(context.Background(), tulip.ModelRequest{
		Messages: []tulip.Message{{Role: "user", Content: "Please refund order ord-4821"}},
		Tools:    []tulip.ToolSpec{{Name: "issue_refund", Description: "Refund an order."}},
	})
	if err != nil {
		panic(err)
	}
	for _, c := range resp.ToolCalls {
		fmt.Println(c.ID, c.Name, c.Arguments)
	}
	// Then: tulip.Options{Models: map[string]tulip.Model{"gpt": model}}

	// Output: call_1 issue_refund {"order_id": "ord-4821", "amount": 120.0}
}
