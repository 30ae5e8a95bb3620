package anthropicmodel

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/anthropicmodel/anthropictest"
)

const testKey = "sk-ant-test-secret"

func newModel(t *testing.T, srv *anthropictest.Server, o Options) *Model {
	t.Helper()
	t.Setenv("ANTHROPIC_API_KEY", testKey)
	o.BaseURL = srv.URL
	if o.Model == "" {
		o.Model = "claude-test"
	}
	m, err := New(o)
	require.NoError(t, err)
	return m
}

func serve(t *testing.T, script ...anthropictest.Reply) *anthropictest.Server {
	srv := anthropictest.New(script...)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { assert.Empty(t, srv.Violations(), "the requests the API would refuse") })
	return srv
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

var refundSpec = tulip.ToolSpec{Name: "issue_refund", Description: "Refund an order.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"}},"required":["order_id","amount"],"additionalProperties":false}`)}

// A conversation of two turns with two parallel calls, one of them served.
func conversation() []tulip.Message {
	return []tulip.Message{
		{Role: "user", Content: "refund ord-1 and page on-call"},
		{Role: "assistant", Content: "On it.", ToolCalls: []tulip.ToolCall{
			{ID: "toolu_a", Name: "issue_refund", Arguments: `{"order_id": "ord-1", "amount": 120.0}`},
			{ID: "toolu_b", Name: "page_oncall", Arguments: ``},
		}},
		{Role: "tool", ToolCallID: "toolu_a", Content: `{"refund_id":"rf-1"}`},
		{Role: "tool", ToolCallID: "toolu_b", Content: `paged`},
		{Role: "assistant", ToolCalls: []tulip.ToolCall{{ID: "toolu_c", Name: "issue_refund", Arguments: `{"amount": 120.0, "order_id": "ord-1"}`}}},
		{Role: "tool", ToolCallID: "toolu_c", Content: `{"refund_id":"rf-1"}`, Served: true},
	}
}

// tulip's conversation becomes content blocks: the assistant's text and
// calls in one message (tool_use with the argument text as sent), the
// results of one turn's calls as tool_result blocks of one user message,
// a served result marked; the tools carry their schemas (an empty one
// becomes {"type":"object"}); the system prompt, the last tool, the end of
// the earlier turns and the end of the newest turn carry cache_control;
// the key goes in x-api-key, with anthropic-version.
func TestRequestMapping(t *testing.T) {
	srv := serve(t, anthropictest.Text("ok"))
	temp := 0.25
	m := newModel(t, srv, Options{SystemPrompt: "You are support.", MaxTokens: 123, Temperature: &temp})
	_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: conversation(),
		Tools: []tulip.ToolSpec{refundSpec, {Name: "page_oncall"}}})
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, testKey, r.Header.Get("X-Api-Key"))
	assert.NotEmpty(t, r.Header.Get("Anthropic-Version"))
	assert.Empty(t, r.Header.Get("Authorization"))
	assert.Equal(t, "claude-test", r.Body["model"])
	assert.EqualValues(t, 123, r.Body["max_tokens"])
	assert.EqualValues(t, 0.25, r.Body["temperature"])
	assert.Nil(t, r.Body["stream"])

	want := `{
	 "system": [{"type":"text","text":"You are support.","cache_control":{"type":"ephemeral"}}],
	 "tools": [
	  {"name":"issue_refund","description":"Refund an order.","input_schema":` + string(refundSpec.Parameters) + `},
	  {"name":"page_oncall","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}
	 ],
	 "messages": [
	  {"role":"user","content":[{"type":"text","text":"refund ord-1 and page on-call"}]},
	  {"role":"assistant","content":[
	   {"type":"text","text":"On it."},
	   {"type":"tool_use","id":"toolu_a","name":"issue_refund","input":{"order_id": "ord-1", "amount": 120.0}},
	   {"type":"tool_use","id":"toolu_b","name":"page_oncall","input":{}}]},
	  {"role":"user","content":[
	   {"type":"tool_result","tool_use_id":"toolu_a","content":[{"type":"text","text":"{\"refund_id\":\"rf-1\"}"}]},
	   {"type":"tool_result","tool_use_id":"toolu_b","content":[{"type":"text","text":"paged"}]}]},
	  {"role":"assistant","content":[
	   {"type":"tool_use","id":"toolu_c","name":"issue_refund","input":{"amount": 120.0, "order_id": "ord-1"},"cache_control":{"type":"ephemeral"}}]},
	  {"role":"user","content":[
	   {"type":"tool_result","tool_use_id":"toolu_c","content":[{"type":"text","text":"{\"served_from_log\":true,\"result\":{\"refund_id\":\"rf-1\"}}"}],"cache_control":{"type":"ephemeral"}}]}
	 ]}`
	got := map[string]any{"system": r.Body["system"], "tools": r.Body["tools"], "messages": r.Body["messages"]}
	assert.JSONEq(t, want, mustJSON(got))
	// The argument text goes as sent, compacted: its keys in their order,
	// 120.0 stays 120.0.
	assert.Contains(t, r.Raw, `"input":{"order_id":"ord-1","amount":120.0}`)
	assert.Equal(t, 4, strings.Count(r.Raw, `"cache_control"`), "four breakpoints at most")
}

// A user message after tool results joins their user message, after them;
// an invalid argument text (a rejected call) still goes as an object.
func TestUserMessageAfterToolResults(t *testing.T) {
	srv := serve(t, anthropictest.Text("ok"))
	m := newModel(t, srv, Options{})
	_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []tulip.ToolCall{{ID: "toolu_a", Name: "issue_refund", Arguments: `{"order_id": `}}},
		{Role: "tool", ToolCallID: "toolu_a", Content: `{"error":"invalid_json"}`},
		{Role: "user", Content: "and now?"},
	}})
	require.NoError(t, err)
	msgs := srv.Requests()[0].Body["messages"].([]any)
	require.Len(t, msgs, 3)
	assert.JSONEq(t, `{"role":"user","content":[
	  {"type":"tool_result","tool_use_id":"toolu_a","content":[{"type":"text","text":"{\"error\":\"invalid_json\"}"}]},
	  {"type":"text","text":"and now?","cache_control":{"type":"ephemeral"}}]}`, mustJSON(msgs[2]))
	assert.JSONEq(t, `{"invalid_arguments":"{\"order_id\": "}`,
		mustJSON(msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)["input"]))
}

// The answer: text blocks joined, tool_use blocks as calls with the input's
// JSON text, usage with the cached prompt counted in PromptTokens.
func TestResponseMapping(t *testing.T) {
	srv := serve(t, anthropictest.Message(
		anthropictest.TextBlock("Let me "), anthropictest.TextBlock("check."),
		anthropictest.ToolUseBlock("toolu_1", "issue_refund", `{"order_id":"ord-1","amount":120.0}`),
		anthropictest.ToolUseBlock("toolu_2", "page_oncall", `{}`)))
	m := newModel(t, srv, Options{})
	res, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}})
	require.NoError(t, err)
	assert.Equal(t, "Let me check.", res.Text)
	assert.Equal(t, []tulip.ToolCall{
		{ID: "toolu_1", Name: "issue_refund", Arguments: `{"order_id":"ord-1","amount":120.0}`},
		{ID: "toolu_2", Name: "page_oncall", Arguments: `{}`},
	}, res.ToolCalls)
	assert.Equal(t, &tulip.Usage{PromptTokens: 11 + 100 + 20, CompletionTokens: 7, CachedTokens: 100}, res.Usage)
}

// With OnText the streaming endpoint is used: every text_delta reaches
// OnText in order, a tool_use's input is assembled from its
// input_json_delta pieces, and the response holds the whole answer, as the
// plain endpoint gives it.
func TestStreaming(t *testing.T) {
	blocks := []anthropictest.Block{
		anthropictest.TextBlock("Refunding order ord-1 now. "),
		anthropictest.ToolUseBlock("toolu_1", "issue_refund", `{"order_id":"ord-1","amount":120.0}`),
		anthropictest.TextBlock("Done — ça va."),
	}
	srv := serve(t, anthropictest.Message(blocks...), anthropictest.Message(blocks...))
	m := newModel(t, srv, Options{})
	var deltas []string
	req := tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "refund ord-1"}}, Tools: []tulip.ToolSpec{refundSpec}}
	req.OnText = func(d string) { deltas = append(deltas, d) }
	streamed, err := m.Respond(ctx(t), req)
	require.NoError(t, err)
	assert.Equal(t, true, srv.Requests()[0].Body["stream"])
	assert.Greater(t, len(deltas), 5, "the text came in pieces")
	assert.Equal(t, "Refunding order ord-1 now. Done — ça va.", strings.Join(deltas, ""))
	assert.Equal(t, strings.Join(deltas, ""), streamed.Text)
	require.Len(t, streamed.ToolCalls, 1)
	assert.Equal(t, `{"order_id":"ord-1","amount":120.0}`, streamed.ToolCalls[0].Arguments, "assembled from its pieces")
	assert.Equal(t, &tulip.Usage{PromptTokens: 131, CompletionTokens: 7, CachedTokens: 100}, streamed.Usage)

	req.OnText = nil
	plain, err := m.Respond(ctx(t), req)
	require.NoError(t, err)
	assert.Nil(t, srv.Requests()[1].Body["stream"])
	assert.Equal(t, plain, streamed, "streamed or not, the same response")
}

// An error event in the stream (overloaded) is a retryable failure.
func TestStreamErrorEvent(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, _ bool) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	})
	m := newModel(t, srv, Options{MaxRetries: -1})
	_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}, OnText: func(string) {}})
	appErr := appError(t, err)
	assert.Equal(t, ErrRetryable, appErr.Type())
	assert.False(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "overloaded_error")
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	return appErr
}

// 429 with retry-after is retried in the activity after the wait the API
// asked for, and succeeds; so are 529 (overloaded) and a 429 that names
// only an anthropic-ratelimit-*-reset time.
func TestRateLimitRetried(t *testing.T) {
	resetIn := func(d time.Duration) anthropictest.Reply {
		return func(w http.ResponseWriter, stream bool) {
			reset := time.Now().Add(d).UTC().Format(time.RFC3339Nano)
			anthropictest.Status(429, "rate_limit_error", "slow down", "Anthropic-Ratelimit-Requests-Reset", reset)(w, stream)
		}
	}
	srv := serve(t,
		anthropictest.Status(429, "rate_limit_error", "slow down", "Retry-After", "1"),
		anthropictest.Status(529, "overloaded_error", "Overloaded"),
		anthropictest.Text("first"),
		resetIn(1500*time.Millisecond),
		anthropictest.Text("second"))
	m := newModel(t, srv, Options{MaxRetries: 3})
	req := tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}}
	start := time.Now()
	res, err := m.Respond(ctx(t), req)
	require.NoError(t, err)
	assert.Equal(t, "first", res.Text)
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "waited for retry-after")
	start = time.Now()
	res, err = m.Respond(ctx(t), req)
	require.NoError(t, err)
	assert.Equal(t, "second", res.Text)
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "waited for the rate limit's reset")
	assert.Len(t, srv.Requests(), 5)
}

// A rate limit whose wait is longer than the model waits in the activity
// (or still failing after the retries) is a retryable failure carrying the
// wait as the next retry's delay: Temporal retries the activity then.
func TestLongRateLimitGoesToTemporal(t *testing.T) {
	srv := serve(t, anthropictest.Status(429, "rate_limit_error", "slow down", "Retry-After", "45"))
	m := newModel(t, srv, Options{})
	start := time.Now()
	_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}})
	appErr := appError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "did not sleep in the activity")
	assert.Equal(t, ErrRetryable, appErr.Type())
	assert.False(t, appErr.NonRetryable())
	assert.Equal(t, 45*time.Second, appErr.NextRetryDelay())
	assert.Len(t, srv.Requests(), 1)
}

// 400, 401 and 403 are non-retryable failures of the stable type
// anthropic.Rejected, asked once; the key never shows in the error.
func TestRejectedIsNonRetryable(t *testing.T) {
	for _, c := range []struct {
		status int
		typ    string
	}{{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"}} {
		t.Run(c.typ, func(t *testing.T) {
			srv := serve(t, anthropictest.Status(c.status, c.typ, "no: "+c.typ))
			m := newModel(t, srv, Options{})
			_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}})
			appErr := appError(t, err)
			assert.Equal(t, ErrRejected, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Contains(t, err.Error(), c.typ)
			assert.NotContains(t, err.Error(), testKey)
			assert.Len(t, srv.Requests(), 1, "asked once")
		})
	}
	t.Run("streaming", func(t *testing.T) {
		srv := serve(t, anthropictest.Status(400, "invalid_request_error", "bad"))
		m := newModel(t, srv, Options{})
		_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}, OnText: func(string) {}})
		appErr := appError(t, err)
		assert.Equal(t, ErrRejected, appErr.Type())
		assert.True(t, appErr.NonRetryable())
	})
}

// The key is read at each request, from the variable Options names; with
// none set, Anthropic's own endpoint is refused before any request.
func TestKeyFromEnvironment(t *testing.T) {
	srv := serve(t, anthropictest.Text("a"), anthropictest.Text("b"))
	m := newModel(t, srv, Options{APIKeyEnv: "TULIP_TEST_ANTHROPIC_KEY"})
	req := tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}}
	t.Setenv("TULIP_TEST_ANTHROPIC_KEY", "k1")
	_, err := m.Respond(ctx(t), req)
	require.NoError(t, err)
	t.Setenv("TULIP_TEST_ANTHROPIC_KEY", "k2")
	_, err = m.Respond(ctx(t), req)
	require.NoError(t, err)
	assert.Equal(t, "k1", srv.Requests()[0].Header.Get("X-Api-Key"))
	assert.Equal(t, "k2", srv.Requests()[1].Header.Get("X-Api-Key"))

	t.Setenv("ANTHROPIC_API_KEY", "")
	own, err := New(Options{Model: "claude-test"})
	require.NoError(t, err)
	_, err = own.Respond(ctx(t), req)
	appErr := appError(t, err)
	assert.Equal(t, ErrRejected, appErr.Type())
	assert.Contains(t, err.Error(), "$ANTHROPIC_API_KEY is not set")
}

func TestNewValidates(t *testing.T) {
	_, err := New(Options{})
	assert.ErrorContains(t, err, "Model is required")
	_, err = New(Options{Model: "m", BaseURL: "ftp://x"})
	assert.ErrorContains(t, err, "not an http(s) URL")
}

// A tool_use without an id is a bad response, non-retryable.
func TestBadResponse(t *testing.T) {
	srv := serve(t, anthropictest.ToolUse("", "issue_refund", `{}`))
	m := newModel(t, srv, Options{})
	_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}})
	appErr := appError(t, err)
	assert.Equal(t, ErrBadResponse, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}

func TestServerDelay(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"3"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second, true},
		{http.Header{"Anthropic-Ratelimit-Tokens-Reset": {now.Add(2 * time.Second).Format(time.RFC3339)},
			"Anthropic-Ratelimit-Requests-Reset": {now.Add(9 * time.Second).Format(time.RFC3339)}}, 9 * time.Second, true},
		{http.Header{"Anthropic-Ratelimit-Tokens-Reset": {now.Add(-2 * time.Second).Format(time.RFC3339)}}, 0, false},
		{http.Header{}, 0, false},
	} {
		got, ok := serverDelay(c.h, now)
		assert.Equal(t, c.ok, ok, "%v", c.h)
		assert.Equal(t, c.want, got, "%v", c.h)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The API's refusal of a prompt over the window is kind ContextTooLong
// (the run compacts and asks again, docs/context.md); another 400 stays
// Rejected.
func TestPromptTooLongIsContextTooLong(t *testing.T) {
	srv := serve(t, anthropictest.Status(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
	m := newModel(t, srv, Options{})
	_, err := m.Respond(ctx(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}})
	appErr := appError(t, err)
	assert.Equal(t, string(tulip.ContextTooLong), appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, tulip.ContextTooLong, tulip.KindOf(err))
}
