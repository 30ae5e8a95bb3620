package tests

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// fakeOpenAI is a loopback HTTP server speaking the chat-completions wire
// format: it answers requests in order from a script and keeps each
// request's body and Authorization header.
type fakeOpenAI struct {
	*httptest.Server
	mu      sync.Mutex
	script  []func(w http.ResponseWriter)
	bodies  []map[string]any
	authHdr []string
	headers []http.Header
	times   []time.Time
}

func newFakeOpenAI(t *testing.T, script ...func(w http.ResponseWriter)) *fakeOpenAI {
	f := &fakeOpenAI{script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body is not JSON: %s", b)
		}
		f.mu.Lock()
		i := len(f.bodies)
		f.bodies = append(f.bodies, body)
		f.authHdr = append(f.authHdr, r.Header.Get("Authorization"))
		f.headers = append(f.headers, r.Header.Clone())
		f.times = append(f.times, time.Now())
		f.mu.Unlock()
		if i >= len(f.script) {
			reply(200, `{"choices":[{"message":{"role":"assistant","content":"(script ended)"}}]}`)(w)
			return
		}
		f.script[i](w)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpenAI) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

func reply(status int, body string, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// toolCalls is a completion whose message calls tools: id, name, argument
// text triples.
func toolCalls(calls ...[3]string) func(w http.ResponseWriter) {
	var tcs []map[string]any
	for _, c := range calls {
		tcs = append(tcs, map[string]any{"id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2]}})
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls",
			"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs}}}})
	return reply(200, string(b))
}

func answer(text string) func(w http.ResponseWriter) {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
		"message": map[string]any{"role": "assistant", "content": text}}}})
	return reply(200, string(b))
}

// runOpenAI runs the support agent against f with the demo toolbox.
func runOpenAI(t *testing.T, f *fakeOpenAI) (*demo.Toolbox, runclient.Handle, *agentrun.RunResult, error) {
	t.Helper()
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	m, err := openaimodel.New(openaimodel.Options{BaseURL: f.URL + "/v1", Model: "gpt-test"})
	require.NoError(t, err)
	tb := demo.NewToolbox()
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"gpt": activities.PublicModel(m)}})
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "gpt", Message: "Please refund ord-1"})
	return tb, h, res, err
}

// messagesOf returns request i's messages.
func messagesOf(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	raw, ok := body["messages"].([]any)
	require.True(t, ok, "messages: %v", body)
	var out []map[string]any
	for _, m := range raw {
		out = append(out, m.(map[string]any))
	}
	return out
}

func toolMessage(t *testing.T, body map[string]any, callID string) map[string]any {
	t.Helper()
	for _, m := range messagesOf(t, body) {
		if m["role"] == "tool" && m["tool_call_id"] == callID {
			return m
		}
	}
	t.Fatalf("no tool message for %s in %v", callID, body)
	return nil
}

// The model re-emits an identical issue_refund after seeing the receipt:
// one body execution. The request bodies carry the tools, the calls' exact
// argument text, and each result under its call's id (the served one
// marked served).
func TestOpenAIReEmittedRefundRunsOnce(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	f := newFakeOpenAI(t,
		toolCalls([3]string{"call_a", "issue_refund", `{"order_id": "ord-1", "amount": 120.0}`}),
		toolCalls([3]string{"call_b", "issue_refund", `{"amount": 120.0, "order_id": "ord-1"}`}),
		answer("Refunded."),
	)
	tb, h, res, err := runOpenAI(t, f)
	require.NoError(t, err)
	assert.Equal(t, "Refunded.", res.Answer)
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
	require.Len(t, res.Trace, 2)
	assert.Equal(t, agentrun.OutcomeExecuted, res.Trace[0].Outcome)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[1].Outcome)

	reqs := f.requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, "gpt-test", reqs[0]["model"])
	assert.Contains(t, mustJSON(reqs[0]["tools"]), `"name":"issue_refund"`)
	// Request 2 repeats the model's call with its exact argument text.
	var sent string
	for _, m := range messagesOf(t, reqs[1]) {
		if calls, ok := m["tool_calls"].([]any); ok {
			sent = calls[0].(map[string]any)["function"].(map[string]any)["arguments"].(string)
		}
	}
	assert.Equal(t, `{"order_id": "ord-1", "amount": 120.0}`, sent, "120.0 stays 120.0")
	first := toolMessage(t, reqs[1], "call_a")
	assert.Contains(t, first["content"], `"refund_id":"rf-1"`)
	served := toolMessage(t, reqs[2], "call_b")
	assert.Contains(t, served["content"], `"served_from_log":true`)
	assert.Contains(t, served["content"], `"refund_id":"rf-1"`)

	// The API key went to the endpoint, and never into history: every
	// payload of the history is decoded before the search (in the history's
	// JSON they are base64, where a plain search finds nothing).
	assert.Equal(t, "Bearer sk-test-secret", f.authHdr[0])
	text := payloadText(t, history(t, dial(t, server.Address()), h.WorkflowID, h.RunID))
	assert.Contains(t, text, "Refunded.", "control: the decoded payloads hold the model's answer")
	assert.Contains(t, text, `"refund_id":"rf-1"`, "control: and the tool's result")
	assert.NotContains(t, text, "sk-test-secret")
}

// payloadText is the decoded data of every payload in a history, one per
// line.
func payloadText(t testing.TB, h *historypb.History) string {
	var sb strings.Builder
	err := proxy.VisitPayloads(context.Background(), h, proxy.VisitPayloadsOptions{
		Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			for _, p := range ps {
				sb.Write(p.GetData())
				sb.WriteByte('\n')
			}
			return ps, nil
		},
	})
	require.NoError(t, err)
	return sb.String()
}

// Azure OpenAI takes its key in an api-key header.
func TestOpenAIKeyHeader(t *testing.T) {
	t.Setenv("AZURE_KEY", "azure-secret")
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		answer("hi")(w)
	}))
	defer srv.Close()
	m, err := openaimodel.New(openaimodel.Options{BaseURL: srv.URL, Model: "m", APIKeyEnv: "AZURE_KEY", KeyHeader: "api-key"})
	require.NoError(t, err)
	res, err := m.Respond(ctxT(t), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "x"}}})
	require.NoError(t, err)
	assert.Equal(t, "hi", res.Text)
	assert.Equal(t, "azure-secret", got.Get("api-key"))
	assert.Empty(t, got.Get("Authorization"))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestOpenAITwoIdenticalCallsInOneResponse(t *testing.T) {
	f := newFakeOpenAI(t,
		toolCalls([3]string{"call_a", "page_oncall", `{"case_id": "k", "summary": "s"}`},
			[3]string{"call_b", "page_oncall", `{"summary": "s", "case_id": "k"}`}),
		answer("Paged."),
	)
	tb, _, res, err := runOpenAI(t, f)
	require.NoError(t, err)
	assert.Equal(t, 1, tb.Invocations()["page_oncall"])
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[1].Outcome)
	assert.Equal(t, "same_response", string(res.Trace[1].Relation))
	toolMessage(t, f.requests()[1], "call_a")
	toolMessage(t, f.requests()[1], "call_b")
}

// 429 is a retryable activity failure, retried after the Retry-After the
// endpoint asked for (3 s, where the activity's own backoff would wait 1 s),
// and the run goes on.
func TestOpenAI429ThenSuccess(t *testing.T) {
	f := newFakeOpenAI(t,
		reply(429, `{"error":{"message":"rate limited"}}`, "Retry-After", "3"),
		answer("Hello."),
	)
	_, _, res, err := runOpenAI(t, f)
	require.NoError(t, err)
	assert.Equal(t, "Hello.", res.Answer)
	require.Len(t, f.requests(), 2)
	gap := f.times[1].Sub(f.times[0])
	assert.GreaterOrEqual(t, gap, 2900*time.Millisecond, "the retry waited for Retry-After")
	t.Logf("retried after %s", gap.Round(time.Millisecond))
}

// hasErrorType walks err's chain for an ApplicationError of type typ.
func hasErrorType(err error, typ string) bool {
	for err != nil {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) {
			return false
		}
		if appErr.Type() == typ {
			return true
		}
		err = appErr.Unwrap()
	}
	return false
}

// A refused request and invalid completions fail the run once, clearly,
// with a typed non-retryable error; nothing panics.
func TestOpenAIFailuresAreClear(t *testing.T) {
	cases := map[string]struct {
		reply func(w http.ResponseWriter)
		typ   string
		msg   string
	}{
		"400":             {reply(400, `{"error":{"message":"bad model"}}`), openaimodel.ErrRejected, "400"},
		"no choices":      {reply(200, `{"choices":[]}`), openaimodel.ErrBadResponse, "no choices"},
		"not JSON":        {reply(200, `<html>oops</html>`), openaimodel.ErrBadResponse, "invalid completion"},
		"nameless call":   {toolCalls([3]string{"call_a", "", `{}`}), openaimodel.ErrBadResponse, "no function name"},
		"call without id": {toolCalls([3]string{"", "issue_refund", `{}`}), openaimodel.ErrBadResponse, "no id"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFakeOpenAI(t, c.reply)
			_, _, res, err := runOpenAI(t, f)
			var failed *runclient.RunFailedError
			require.ErrorAs(t, err, &failed)
			assert.True(t, hasErrorType(err, c.typ), "%v", err)
			require.NotNil(t, res)
			assert.Equal(t, agentrun.StatusFailed, res.Status)
			assert.Contains(t, res.Error, c.msg)
			assert.Len(t, f.requests(), 1, "non-retryable: asked once")
		})
	}
}

// A tool call with malformed arguments goes through the rejection rule; the
// model sees the error and the run goes on.
func TestOpenAIMalformedArgumentsAreRejected(t *testing.T) {
	f := newFakeOpenAI(t,
		toolCalls([3]string{"call_a", "issue_refund", `{"order_id": `}),
		answer("Sorry."),
	)
	tb, _, res, err := runOpenAI(t, f)
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeRejected, res.Trace[0].Outcome)
	assert.Equal(t, 0, tb.Invocations()["issue_refund"])
	assert.Contains(t, toolMessage(t, f.requests()[1], "call_a")["content"], "invalid_json")
}

func TestCLIChat(t *testing.T) {
	f := newFakeOpenAI(t,
		toolCalls([3]string{"call_a", "issue_refund", `{"order_id": "ord-1", "amount": 5}`}),
		toolCalls([3]string{"call_b", "issue_refund", `{"order_id": "ord-1", "amount": 5.0}`}),
		answer("Done."),
	)
	stdout, stderr, code := runCLI(t, "chat", "--base-url", f.URL+"/v1", "--model", "m", "--json", "--address", server.Address(), "refund ord-1")
	require.Equal(t, 0, code, stderr)
	lines, sum := parseTrace(t, stdout)
	require.Len(t, lines, 2)
	assert.Equal(t, "cached", string(lines[1].Outcome))
	// It ends with docs/scenarios.md's summary line, as 'tulip run --json' does.
	assert.Equal(t, 1, sum.BodyInvocations["issue_refund"])
	require.Len(t, sum.Runs, 1)
	assert.Equal(t, "completed", sum.Runs[0].Status)
	assert.True(t, strings.HasPrefix(strings.TrimSpace(stdout[strings.LastIndex(strings.TrimSpace(stdout), "\n")+1:]), `{"summary":`))

	stdout, stderr, code = runCLI(t, "chat", "--model", "m", "hi")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "usage: tulip chat")
	assert.Empty(t, stdout)
	_, stderr, code = runCLI(t, "chat", "--base-url", "ftp://x", "--model", "m", "--address", server.Address(), "hi")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "not an http(s) URL")
}

var _ = strings.TrimSpace

// An interrupted chat on a file-backed embedded server is resumed by a later
// process: 'tulip resume --db' restarts the server and the chat worker.
func TestCLIChatInterruptThenResumeInALaterProcess(t *testing.T) {
	f := newFakeOpenAI(t,
		toolCalls([3]string{"call_a", "isolate_host", `{"host": "web-1"}`}),
		answer("Isolated."),
	)
	db := t.TempDir() + "/chat.db"
	// An Azure-style endpoint: the key in an api-key header, from a
	// variable of the user's choosing.
	t.Setenv("TULIP_TEST_AZURE_KEY", "azure-secret")
	stdout, stderr, code := runCLI(t, "chat", "--base-url", f.URL+"/v1", "--model", "m", "--json", "--db", db,
		"--api-key-env", "TULIP_TEST_AZURE_KEY", "--api-key-header", "api-key",
		"--thread", "incident-7", "--hooks", "approve_isolate_host", "isolate web-1")
	t.Logf("chat stderr:\n%s\nstdout:\n%s", stderr, stdout)
	require.Equal(t, 0, code, stderr)
	lines, _ := parseTrace(t, stdout)
	require.Len(t, lines, 1)
	assert.Equal(t, "held", string(lines[0].Outcome))

	// Run the printed command exactly as printed (plus --json).
	m := regexp.MustCompile(`(?m)^  tulip (resume .*)$`).FindStringSubmatch(stderr)
	require.Len(t, m, 2, stderr)
	printed := strings.Fields(m[1])
	assert.Equal(t, []string{"resume", "incident-7", "--interrupt", "int-1"}, printed[:4])
	stdout, stderr, code = runCLI(t, append(printed, "--json")...)
	require.Equal(t, 0, code, stderr)
	lines, _ = parseTrace(t, stdout)
	require.Len(t, lines, 2)
	assert.Equal(t, "dangling", string(lines[1].Outcome))
	require.Len(t, f.requests(), 2)
	for i, h := range f.headers {
		assert.Equal(t, "azure-secret", h.Get("api-key"), "request %d", i)
		assert.Empty(t, h.Get("Authorization"), "request %d", i)
	}

	// Every command that reads a thread takes --db: the chat's thread is
	// inspected, explained, exported and its history written from the
	// file alone.
	stdout, stderr, code = runCLI(t, "inspect", "incident-7", "--db", db)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "incident-7", "%s", stdout)
	dir := t.TempDir()
	_, stderr, code = runCLI(t, "export", "incident-7", "--db", db, "-o", dir)
	require.Equal(t, 0, code, stderr)
	exported, err := os.ReadFile(filepath.Join(dir, "incident-7.json"))
	require.NoError(t, err)
	assert.Contains(t, string(exported), "isolate web-1")
	_, stderr, code = runCLI(t, "history", "incident-7", "--db", db, "-o", filepath.Join(dir, "h.json"))
	require.Equal(t, 0, code, stderr)
	_, err = os.Stat(filepath.Join(dir, "h.json"))
	require.NoError(t, err)
	_, stderr, code = runCLI(t, "explain", "incident-7", "call_a", "--db", db)
	assert.NotContains(t, stderr, "flag provided but not defined", "explain takes --db")
	_, stderr, code = runCLI(t, "watch", "incident-7", "--db", db)
	assert.NotContains(t, stderr, "flag provided but not defined", "watch takes --db")
	assert.Contains(t, stderr, "closed", "watch reads the thread's closed run from the file")
}
