package openaimodel

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

func TestReadStream(t *testing.T) {
	sse := strings.Join([]string{
		`: keep-alive`,
		`data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`,
		``,
		`data: {"choices":[{"delta":{"content":"Refunding "}}]}`,
		`data: {"choices":[{"delta":{"content":"now."}}]}`,
		`data: {"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"page_oncall","arguments":""}}]}}]}`,
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"issue_refund","arguments":"{\"order_id\": \"ord-4821\", "}}]}}]}`,
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"amount\": 120.0}"}}]}}]}`,
		`data: {"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}}]}`,
		`data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}}`,
		`data: [DONE]`,
	}, "\n")
	var pieces []string
	resp, err := readStream(strings.NewReader(sse), func(s string) { pieces = append(pieces, s) })
	require.NoError(t, err)
	assert.Equal(t, []string{"Refunding ", "now."}, pieces)
	assert.Equal(t, "Refunding now.", resp.Text)
	assert.Equal(t, []tulip.ToolCall{
		{ID: "c1", Name: "issue_refund", Arguments: `{"order_id": "ord-4821", "amount": 120.0}`},
		{ID: "c2", Name: "page_oncall", Arguments: `{}`},
	}, resp.ToolCalls, "pieces assembled by index, the argument text exactly as sent")
	assert.Equal(t, &tulip.Usage{PromptTokens: 12, CompletionTokens: 7}, resp.Usage)
}

func TestReadStreamFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		sse       string
		typ       string
		retryable bool
	}{
		"cut before DONE":   {`data: {"choices":[{"delta":{"content":"a"}}]}`, ErrRetryable, true},
		"error chunk":       {`data: {"error":{"message":"overloaded"}}`, ErrRetryable, true},
		"not JSON":          {"data: {nope\ndata: [DONE]", ErrBadResponse, false},
		"call without name": {`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"arguments":"{}"}}]}}]}` + "\ndata: [DONE]", ErrBadResponse, false},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readStream(strings.NewReader(tc.sse), func(string) {})
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			assert.Equal(t, tc.typ, appErr.Type())
			assert.Equal(t, !tc.retryable, appErr.NonRetryable())
		})
	}
}

func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\ndata: [DONE]")
	f.Add("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"id\":\"a\",\"function\":{\"name\":\"t\",\"arguments\":\"{\"}}]}}]}\ndata: [DONE]")
	f.Fuzz(func(t *testing.T, sse string) {
		var text strings.Builder
		resp, err := readStream(strings.NewReader(sse), func(s string) { text.WriteString(s) })
		if err != nil {
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if resp.Text != text.String() {
			t.Fatalf("pieces %q do not make the text %q", text.String(), resp.Text)
		}
	})
}
