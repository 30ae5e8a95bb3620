package openaimodel

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
)

// FuzzParseResponse: whatever an endpoint sends, the decoder returns a
// response or a typed non-retryable openai.BadResponse; it never panics,
// and a call it returns always has an id and a name.
func FuzzParseResponse(f *testing.F) {
	for _, seed := range []string{
		`{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`,
		`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"issue_refund","arguments":"{\"order_id\": \"o\", \"amount\": 120.0}"}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"t","arguments":{"a":1}}}]}}]}`,
		`{"choices":[]}`, `{"choices":[{"message":{"tool_calls":[{"id":"","function":{"name":""}}]}}]}`,
		`<html>oops</html>`, ``, `null`, `{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"t","arguments":"\"unterminated"}}]}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := parseResponse(data)
		if err != nil {
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != ErrBadResponse || !app.NonRetryable() {
				t.Fatalf("error %v is not a non-retryable %s", err, ErrBadResponse)
			}
			return
		}
		for _, c := range resp.ToolCalls {
			if c.ID == "" || c.Name == "" {
				t.Fatalf("call without id or name: %+v", c)
			}
		}
	})
}
