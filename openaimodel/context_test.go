package openaimodel

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

// OpenAI's refusal of a request over the model's window (400,
// code context_length_exceeded) is kind ContextTooLong; another 400 stays
// Rejected. Known models report their window; a dated snapshot its
// family's; Options.ContextWindow wins.
func TestContextTooLongAndWindows(t *testing.T) {
	for _, c := range []struct {
		code string
		want string
	}{{"context_length_exceeded", string(tulip.ContextTooLong)}, {"invalid_value", ErrRejected}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"no","type":"invalid_request_error","param":"messages","code":"` + c.code + `"}}`))
		}))
		m, err := New(Options{BaseURL: srv.URL, Model: "gpt-4o", APIKeyEnv: "TULIP_TEST_NO_KEY"})
		require.NoError(t, err)
		_, err = m.Respond(context.Background(), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}})
		srv.Close()
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		assert.Equal(t, c.want, app.Type(), c.code)
		assert.True(t, app.NonRetryable())
	}
	for model, want := range map[string]int{"gpt-4o": 128000, "gpt-4o-mini-2024-07-18": 128000, "gpt-4.1": 1047576, "gpt-5": 400000, "llama3": 0} {
		m, err := New(Options{BaseURL: "http://127.0.0.1:1", Model: model})
		require.NoError(t, err)
		assert.Equal(t, want, m.ContextWindow(), model)
	}
	m, err := New(Options{BaseURL: "http://127.0.0.1:1", Model: "gpt-4o", ContextWindow: 8192})
	require.NoError(t, err)
	assert.Equal(t, 8192, m.ContextWindow())
}
