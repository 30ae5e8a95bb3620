package openaimodel

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
)

// A run's instructions follow the system prompt in the system message, its
// params go on the wire (temperature over the model's own), and the usage's
// cached prompt tokens are read back.
func TestRunInstructionsAndParamsOnTheWire(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = nil
		_ = json.Unmarshal(b, &got)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"}}],`+
			`"usage":{"prompt_tokens":30,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":16}}}`)
	}))
	defer srv.Close()
	own, temp, topP, maxOut := 0.7, 0.2, 0.9, 77
	m, err := New(Options{BaseURL: srv.URL, Model: "gpt-test", SystemPrompt: "You are support.", Temperature: &own, APIKeyEnv: "TULIP_TEST_NO_KEY"})
	require.NoError(t, err)
	msgs := []tulip.Message{{Role: "user", Content: "hi"}}

	resp, err := m.Respond(context.Background(), tulip.ModelRequest{Messages: msgs, Instructions: "Answer in French.",
		Params: &tulip.ModelParams{Temperature: &temp, TopP: &topP, MaxOutputTokens: &maxOut}})
	require.NoError(t, err)
	assert.Equal(t, &tulip.Usage{PromptTokens: 30, CompletionTokens: 4, CachedTokens: 16}, resp.Usage)
	assert.Equal(t, 0.2, got["temperature"])
	assert.Equal(t, 0.9, got["top_p"])
	assert.Equal(t, float64(77), got["max_tokens"])
	wire := got["messages"].([]any)
	require.Len(t, wire, 2)
	assert.Equal(t, map[string]any{"role": "system", "content": "You are support.\n\nAnswer in French."}, wire[0])

	_, err = m.Respond(context.Background(), tulip.ModelRequest{Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, 0.7, got["temperature"], "the model's own when the run sets none")
	assert.NotContains(t, got, "top_p")
	assert.NotContains(t, got, "max_tokens")
	assert.Equal(t, "You are support.", got["messages"].([]any)[0].(map[string]any)["content"])

	m, err = New(Options{BaseURL: srv.URL, Model: "gpt-test", APIKeyEnv: "TULIP_TEST_NO_KEY"})
	require.NoError(t, err)
	_, err = m.Respond(context.Background(), tulip.ModelRequest{Messages: msgs, Instructions: "Answer in French."})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"role": "system", "content": "Answer in French."}, got["messages"].([]any)[0], "instructions alone")
	assert.NotContains(t, got, "temperature")
}
