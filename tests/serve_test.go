package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// serveModel is a loopback OpenAI-compatible model for the 'tulip serve'
// tests. It answers from the conversation, not from a request count:
//   - last message a user's "refund ord-N" or "are you sure?": an
//     issue_refund call for ord-N (amount 20), the same call again for the
//     second (the re-emitted refund);
//   - "isolate HOST": an isolate_host call;
//   - "weather in CITY": a lookup_weather call (a client tool);
//   - "fail": a 400 (the run fails);
//   - a tool's result last, or any other message: an answer streamed in
//     pieces, gap apart ("slow" in the conversation: 6 pieces).
type serveModel struct {
	*httptest.Server
	gap    time.Duration
	mu     sync.Mutex
	bodies []map[string]any
}

func newServeModel(t *testing.T, gap time.Duration) *serveModel {
	m := &serveModel{gap: gap}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *serveModel) requests() []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]map[string]any(nil), m.bodies...)
}

var refundRE = regexp.MustCompile(`refund (ord-\d+)`)

func (m *serveModel) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.bodies = append(m.bodies, body)
	m.mu.Unlock()
	msgs, _ := body["messages"].([]any)
	all, _ := json.Marshal(msgs)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	role, _ := last["role"].(string)
	content, _ := last["content"].(string)
	if role == "user" {
		switch {
		case refundRE.MatchString(content):
			toolCalls([3]string{"call-r1", "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":20}`, refundRE.FindStringSubmatch(content)[1])})(w)
			return
		case strings.Contains(content, "are you sure"):
			// The earlier conversation is in the request: re-emit its refund.
			if o := refundRE.FindSubmatch(all); o != nil {
				toolCalls([3]string{"call-r2", "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":20}`, o[1])})(w)
				return
			}
		case strings.HasPrefix(content, "weather in "):
			toolCalls([3]string{"call-w1", "lookup_weather", fmt.Sprintf(`{"city":%q}`, strings.TrimPrefix(content, "weather in "))})(w)
			return
		case strings.HasPrefix(content, "isolate "):
			toolCalls([3]string{"call-i1", "isolate_host", fmt.Sprintf(`{"host":%q}`, strings.TrimPrefix(content, "isolate "))})(w)
			return
		case content == "fail":
			reply(400, `{"error":{"message":"this model refuses","type":"invalid_request_error"}}`)(w)
			return
		}
	}
	pieces := []string{"Done: ", "all ", "settled."}
	if bytes.Contains(all, []byte("slow")) {
		pieces = []string{"Slowly ", "but ", "surely, ", "the ", "run ", "ends."}
	}
	if stream, _ := body["stream"].(bool); !stream {
		answer(strings.Join(pieces, ""))(w)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for _, p := range pieces {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"delta": map[string]any{"content": p}}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(m.gap):
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// lockedBuffer is a bytes.Buffer safe for one writer and readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var serveURLRE = regexp.MustCompile(`tulip serve: (http://\S+)/v1`)
var temporalRE = regexp.MustCompile(`Temporal server: (\S+)`)

// startServe runs 'tulip serve ARGS --listen 127.0.0.1:0' in process until
// the test ends and returns its URL (without /v1) and its stdout.
func startServe(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Log("tulip serve did not stop")
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if m := serveURLRE.FindStringSubmatch(out.String()); m != nil {
			return m[1], &out
		}
		select {
		case code := <-done:
			t.Fatalf("tulip serve exited %d: %s %s", code, out.String(), errb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("tulip serve printed no URL: %s %s", out.String(), errb.String())
	return "", nil
}

// serveWorker runs the worker 'tulip serve --no-worker' leaves to others:
// the demo toolbox refunding through a billing witness, the hooks, and
// the model m as "openai" (the model 'tulip serve' runs).
func serveWorker(t *testing.T, addr, tq string, m *serveModel) (*billing.Server, *demo.Toolbox) {
	t.Helper()
	bill, tb := billedToolbox(t)
	om, err := openaimodel.New(openaimodel.Options{BaseURL: m.URL + "/v1", Model: "scripted"})
	require.NoError(t, err)
	startWorker(t, dial(t, addr), tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"openai": activities.PublicModel(om)}})
	return bill, tb
}

// tulipExt reads an output item's "tulip" extension field.
func tulipExt(t *testing.T, raw string) map[string]any {
	t.Helper()
	var item struct {
		Tulip map[string]any `json:"tulip"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &item))
	return item.Tulip
}

func apiErr(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	require.True(t, errors.As(err, &e), "an OpenAI API error: %v", err)
	return e
}

// TestServeOpenAIGo drives 'tulip serve' (with --no-worker and a bearer
// token; the worker runs in this test) with openai-go's client:
//   - continued with previous_response_id, the model's re-emitted refund
//     is served (billing asked once) and the model sees the earlier turn;
//   - an approval round trip: the run stops with an mcp_approval_request
//     (response completed, as OpenAI's is), a new message on its thread is refused 409,
//     and the approval runs the held call with exactly its arguments;
//   - a client that leaves mid-stream: the run completes anyway, and the
//     response read back shows it; a reconnect with starting_after gets
//     only the events after it;
//   - error shapes: 404 unknown model, 400 naming the bad field, 401 bad
//     token, 502 for a failing model; and a chat completion on a thread.
func TestServeOpenAIGo(t *testing.T) {
	m := newServeModel(t, 350*time.Millisecond)
	tq := taskQueue(t.Name())
	bill, tb := serveWorker(t, server.Address(), tq, m)
	key := writeFile(t, "key", "s3cret-token\n")
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq,
		"--hooks", "approve_isolate_host", "--api-key-file", key, "--agent", "support", "--agent", "triage")
	oc := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("s3cret-token"), option.WithMaxRetries(0))
	ctx := ctxT(t)

	t.Run("models", func(t *testing.T) {
		page, err := oc.Models.List(ctx)
		require.NoError(t, err)
		var ids []string
		for _, md := range page.Data {
			ids = append(ids, md.ID)
		}
		assert.Equal(t, []string{"support", "triage"}, ids)
	})

	t.Run("continue serves the refund", func(t *testing.T) {
		r1, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please refund ord-7")}})
		require.NoError(t, err)
		assert.Equal(t, responses.ResponseStatusCompleted, r1.Status)
		assert.Equal(t, "Done: all settled.", r1.OutputText())
		require.Equal(t, "mcp_call", r1.Output[0].Type)
		assert.Equal(t, "issue_refund", r1.Output[0].Name)
		assert.Equal(t, "executed", tulipExt(t, r1.Output[0].RawJSON())["outcome"])

		r2, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support", PreviousResponseID: openai.String(r1.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("are you sure it went through?", responses.EasyInputMessageRoleUser)}}})
		require.NoError(t, err)
		assert.NotEqual(t, r1.ID, r2.ID)
		require.Equal(t, "mcp_call", r2.Output[0].Type)
		ext := tulipExt(t, r2.Output[0].RawJSON())
		assert.Equal(t, "cached", ext["outcome"], "the re-emitted refund is served from the thread's log (outcome cached)")
		assert.Equal(t, 1, refundsAsked(bill), "billing refunded once")
		assert.Equal(t, 1, tb.Invocations()["issue_refund"])
		// The model's third request (the second response's first) holds the first turn.
		reqs := m.requests()
		require.GreaterOrEqual(t, len(reqs), 3)
		seen, _ := json.Marshal(reqs[2]["messages"])
		assert.Contains(t, string(seen), "Please refund ord-7")

		got, err := oc.Responses.Get(ctx, r2.ID, responses.ResponseGetParams{})
		require.NoError(t, err)
		assert.Equal(t, responses.ResponseStatusCompleted, got.Status)
		assert.Equal(t, r2.OutputText(), got.OutputText())
	})

	t.Run("approval round trip", func(t *testing.T) {
		r1, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("isolate web-9")}})
		require.NoError(t, err)
		assert.Equal(t, responses.ResponseStatusCompleted, r1.Status, "an approval request completes the response, as OpenAI's does")
		last := r1.Output[len(r1.Output)-1]
		require.Equal(t, "mcp_approval_request", last.Type)
		assert.Equal(t, "isolate_host", last.Name)
		assert.JSONEq(t, `{"host":"web-9"}`, last.Arguments.OfString)
		assert.Equal(t, 0, tb.Invocations()["isolate_host"])

		// The thread is busy until the interrupt is answered.
		_, err = oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support", PreviousResponseID: openai.String(r1.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello?")}})
		e := apiErr(t, err)
		assert.Equal(t, http.StatusConflict, e.StatusCode)
		assert.Equal(t, "thread_busy", e.Code)

		r2, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support", PreviousResponseID: openai.String(r1.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMcpApprovalResponse(last.ID, true)}}})
		require.NoError(t, err)
		assert.Equal(t, responses.ResponseStatusCompleted, r2.Status)
		assert.Equal(t, 1, tb.Invocations()["isolate_host"])
		var ran bool
		for _, it := range r2.Output {
			// The held call, run on approval: outcome dangling (run
			// although unrecorded), with its result.
			if it.Type == "mcp_call" && it.Name == "isolate_host" && tulipExt(t, it.RawJSON())["outcome"] == "dangling" {
				ran = true
				assert.JSONEq(t, `{"host":"web-9"}`, it.Arguments.OfString)
				assert.Equal(t, map[string]any{"isolated": "web-9"}, tulipExt(t, it.RawJSON())["result"])
			}
		}
		assert.True(t, ran, "the held call ran: %s", r2.RawJSON())
	})

	t.Run("streamed approval round trip", func(t *testing.T) {
		read := func(st interface {
			Next() bool
			Current() responses.ResponseStreamEventUnion
			Err() error
		}) ([]responses.ResponseStreamEventUnion, string) {
			var evs []responses.ResponseStreamEventUnion
			var text strings.Builder
			for st.Next() {
				ev := st.Current()
				evs = append(evs, ev)
				if ev.Type == "response.output_text.delta" {
					text.WriteString(ev.Delta)
				}
			}
			require.NoError(t, st.Err())
			return evs, text.String()
		}
		evs, _ := read(oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "support",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("isolate db-2")}}))
		require.NotEmpty(t, evs)
		last := evs[len(evs)-1]
		require.Equal(t, "response.completed", last.Type)
		var ask responses.ResponseOutputItemUnion
		for _, ev := range evs {
			if ev.Type == "response.output_item.done" && ev.Item.Type == "mcp_approval_request" {
				ask = ev.Item
			}
		}
		require.Equal(t, "mcp_approval_request", ask.Type)
		assert.JSONEq(t, `{"host":"db-2"}`, ask.Arguments.OfString)

		evs2, text := read(oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "support", PreviousResponseID: openai.String(last.Response.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMcpApprovalResponse(ask.ID, true)}}}))
		require.NotEmpty(t, evs2)
		assert.Equal(t, "response.completed", evs2[len(evs2)-1].Type)
		assert.Greater(t, evs2[0].SequenceNumber, last.SequenceNumber-seqSlack, "the answer's events go on from the interrupt's offset")
		assert.Equal(t, "Done: all settled.", text)
		var ran bool
		for _, ev := range evs2 {
			if ev.Type == "response.output_item.done" && ev.Item.Type == "mcp_call" && ev.Item.Name == "isolate_host" {
				ran = ran || tulipExt(t, ev.Item.RawJSON())["outcome"] == "dangling"
			}
		}
		assert.True(t, ran, "the approved call's outcome is streamed")
	})

	t.Run("chat completion streamed", func(t *testing.T) {
		st := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "support",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello, slowly")}})
		var text strings.Builder
		chunks := 0
		for st.Next() {
			ch := st.Current()
			if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
				chunks++
				text.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		require.NoError(t, st.Err())
		assert.Equal(t, "Slowly but surely, the run ends.", text.String())
		assert.Greater(t, chunks, 1)
	})

	t.Run("client leaves mid-stream", func(t *testing.T) {
		sctx, leave := context.WithCancel(ctx)
		stream := oc.Responses.NewStreaming(sctx, responses.ResponseNewParams{Model: "support",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me a slow story")}})
		var id, first string
		var seqs []int64
		deltas := 0
		for stream.Next() {
			ev := stream.Current()
			seqs = append(seqs, ev.SequenceNumber)
			if ev.Type == "response.created" {
				id = ev.Response.ID
			}
			if ev.Type == "response.output_text.delta" {
				deltas++
				first = ev.Delta
				break // the client leaves after the first piece
			}
		}
		leave()
		_ = stream.Close()
		require.NotEmpty(t, id)
		require.Equal(t, 1, deltas)
		// The run goes on: a reconnect after the last event read gets the
		// rest, in order, live.
		after := seqs[len(seqs)-1]
		re := oc.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(after)})
		var text strings.Builder
		var types []string
		prev := after
		for re.Next() {
			ev := re.Current()
			assert.Greater(t, ev.SequenceNumber, prev)
			prev = ev.SequenceNumber
			types = append(types, ev.Type)
			if ev.Type == "response.output_text.delta" {
				text.WriteString(ev.Delta)
			}
		}
		require.NoError(t, re.Err())
		assert.NotContains(t, types, "response.created")
		assert.Equal(t, "response.completed", types[len(types)-1])
		assert.Equal(t, "Slowly but surely, the run ends.", first+text.String(), "the reconnect starts after the first piece")
		deadline := time.Now().Add(60 * time.Second)
		var got *responses.Response
		for time.Now().Before(deadline) {
			var err error
			got, err = oc.Responses.Get(ctx, id, responses.ResponseGetParams{})
			require.NoError(t, err)
			if got.Status != responses.ResponseStatusInProgress {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		assert.Equal(t, responses.ResponseStatusCompleted, got.Status)
		assert.Equal(t, "Slowly but surely, the run ends.", got.OutputText())

		// Once closed, its stream read again from the start gives its
		// output items: the whole answer.
		again := oc.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{})
		var last responses.ResponseStreamEventUnion
		var whole strings.Builder
		n := 0
		for again.Next() {
			last = again.Current()
			if last.Type == "response.output_text.delta" {
				whole.WriteString(last.Delta)
			}
			n++
		}
		require.NoError(t, again.Err())
		assert.Greater(t, n, 1)
		assert.Equal(t, "Slowly but surely, the run ends.", whole.String())
		assert.Equal(t, "response.completed", last.Type)

	})

	t.Run("errors", func(t *testing.T) {
		_, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		e := apiErr(t, err)
		assert.Equal(t, http.StatusNotFound, e.StatusCode)
		assert.Equal(t, "model", e.Param)
		assert.Equal(t, "model_not_found", e.Code)

		_, err = oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("one", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfMessage("two", responses.EasyInputMessageRoleAssistant)}}})
		e = apiErr(t, err)
		assert.Equal(t, http.StatusBadRequest, e.StatusCode)
		assert.Equal(t, "input", e.Param, "an assistant message after the user's: no new user message")
		assert.Equal(t, "invalid_request_error", e.Type)

		bad := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
		_, err = bad.Models.List(ctx)
		e = apiErr(t, err)
		assert.Equal(t, http.StatusUnauthorized, e.StatusCode)
		assert.Equal(t, "invalid_api_key", e.Code)
		assert.NotContains(t, e.Message, "s3cret")

		_, err = oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("fail")}})
		e = apiErr(t, err)
		assert.Equal(t, http.StatusBadGateway, e.StatusCode, e.Message)
	})

	t.Run("chat completion on a thread", func(t *testing.T) {
		thread := "serve-chat-" + fmt.Sprint(time.Now().UnixNano())
		cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "support",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please refund ord-8")}},
			option.WithHeader("X-Tulip-Thread", thread))
		require.NoError(t, err)
		assert.Equal(t, "Done: all settled.", cc.Choices[0].Message.Content)
		before := refundsAsked(bill)
		cc, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "support",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please refund ord-8"),
				openai.AssistantMessage("Done: all settled."), openai.UserMessage("are you sure?")}},
			option.WithHeader("X-Tulip-Thread", thread))
		require.NoError(t, err)
		assert.Equal(t, before, refundsAsked(bill), "the thread's refund was served")
		assert.Contains(t, cc.RawJSON(), `"outcome":"cached"`)

		// Several turns without a thread are refused.
		_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "support",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a"), openai.AssistantMessage("b"), openai.UserMessage("c")}})
		e := apiErr(t, err)
		assert.Equal(t, http.StatusBadRequest, e.StatusCode)
		assert.Equal(t, "messages", e.Param)
	})
}

// seqSlack: the events that open a response come from its first offset.
const seqSlack = 64

// sseEvents reads a response body of server-sent events' data.
func sseEvents(t *testing.T, body io.Reader) []map[string]any {
	t.Helper()
	var evs []map[string]any
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
			evs = append(evs, ev)
		}
	}
	return evs
}

// TestServeTypeScript drives 'tulip serve --db FILE --no-worker' (the
// embedded server; the worker runs in this test, as a separate worker
// would) with the official openai npm client (tests/ts/serve.mjs): it
// lists the models, streams a response in several text deltas with
// increasing sequence numbers, continues it with previous_response_id
// (the re-emitted refund is served: billing asked once; the model saw the
// first turn), reads it back, gets a chat completion, and an unknown
// model's 404.
func TestServeTypeScript(t *testing.T) {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed for the openai npm client test")
	dir := npmModules(t, "openai")
	// Pieces 700 ms apart: the text reaches the run in pieces of about a
	// second, so this answer (2 s) comes in at least two deltas.
	m := newServeModel(t, 700*time.Millisecond)
	tq := taskQueue(t.Name())
	base, out := startServe(t, "--db", filepath.Join(t.TempDir(), "serve.db"), "--no-worker", "--task-queue", tq)
	addr := temporalRE.FindStringSubmatch(out.String())
	require.NotNil(t, addr, "serve prints its embedded server's address: %s", out.String())
	bill, _ := serveWorker(t, addr[1], tq, m)

	cmd := exec.CommandContext(ctxT(t), node, filepath.Join(dir, "serve.mjs"), base+"/v1")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err)
	type item struct {
		Type  string         `json:"type"`
		Name  string         `json:"name"`
		Tulip map[string]any `json:"tulip"`
	}
	var got struct {
		Models []string `json:"models"`
		Events []struct {
			Type  string `json:"type"`
			Seq   int64  `json:"seq"`
			Delta string `json:"delta"`
			Item  *item  `json:"item"`
		} `json:"events"`
		First, Second struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Text   string `json:"text"`
			Output []item `json:"output"`
		}
		ReadBack struct {
			ID, Status, Text string
		} `json:"readBack"`
		Chat struct {
			Content, Thread string
		} `json:"chat"`
		Unknown *struct {
			Status      int
			Code, Param string
		} `json:"unknown"`
	}
	require.NoError(t, json.Unmarshal(stdout, &got), "%s", stdout)
	assert.Equal(t, []string{"support"}, got.Models)

	var types []string
	var text strings.Builder
	deltas := 0
	prev := int64(-1)
	for _, ev := range got.Events {
		assert.Greater(t, ev.Seq, prev, "sequence numbers increase")
		prev = ev.Seq
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			deltas++
			text.WriteString(ev.Delta)
		}
	}
	require.NotEmpty(t, types)
	assert.Equal(t, "response.created", types[0])
	assert.Equal(t, "response.completed", types[len(types)-1])
	assert.GreaterOrEqual(t, deltas, 2, "the answer came in several deltas: %v", types)
	assert.Equal(t, "Done: all settled.", text.String())
	assert.Contains(t, types, "response.output_item.done")
	assert.Equal(t, "completed", got.First.Status)
	require.NotEmpty(t, got.First.Output)
	assert.Equal(t, "executed", got.First.Output[0].Tulip["outcome"])

	assert.Equal(t, "completed", got.Second.Status)
	require.NotEmpty(t, got.Second.Output)
	assert.Equal(t, "issue_refund", got.Second.Output[0].Name)
	assert.Equal(t, "cached", got.Second.Output[0].Tulip["outcome"], "served from the thread's log")
	assert.Equal(t, "Done: all settled.", got.Second.Text)
	assert.Equal(t, 1, refundsAsked(bill), "billing refunded once")
	reqs := m.requests()
	require.GreaterOrEqual(t, len(reqs), 3)
	seen, _ := json.Marshal(reqs[2]["messages"])
	assert.Contains(t, string(seen), "Please refund ord-5", "the model saw the first turn")

	assert.Equal(t, got.Second.ID, got.ReadBack.ID)
	assert.Equal(t, "completed", got.ReadBack.Status)
	assert.Equal(t, "Done: all settled.", got.Chat.Content)
	assert.NotEmpty(t, got.Chat.Thread)
	require.NotNil(t, got.Unknown)
	assert.Equal(t, 404, got.Unknown.Status)
	assert.Equal(t, "model", got.Unknown.Param)
}

// TestServeDocExamples runs docs/serve.md's curl examples (the blocks
// labelled serve-curl), in order, with the curl binary against 'tulip
// serve' with its in-process worker (the scripted model behind
// --base-url, an embedded server in --db): each succeeds and shows what
// its text says.
func TestServeDocExamples(t *testing.T) {
	for _, bin := range []string{"curl", "jq", "bash"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed", bin)
		}
	}
	m := newServeModel(t, 350*time.Millisecond)
	base, _ := startServe(t, "--db", filepath.Join(t.TempDir(), "serve.db"), "--base-url", m.URL+"/v1", "--model", "scripted",
		"--task-queue", taskQueue(t.Name()), "--hooks", "approve_isolate_host")
	var blocks []docBlock
	for _, b := range docBlocks(t, filepath.Join("..", "docs", "serve.md")) {
		if b.kind == "serve-curl" {
			blocks = append(blocks, b)
		}
	}
	want := []string{`"id":"support"`, `"outcome":"cached"`, `"outcome":"dangling"`,
		"event: response.completed", `"status":"completed"`, `"thread":"tulip-chat/default/customer-4821"`, `"code":"model_not_found"`}
	require.Len(t, blocks, len(want), "docs/serve.md's curl examples")
	for i, b := range blocks {
		script := "set -euo pipefail\n" + strings.ReplaceAll(b.body, "http://127.0.0.1:8787", base)
		cmd := exec.CommandContext(ctxT(t), "bash", "-c", script)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s: %s %s", b, out, stderr.String())
		assert.Contains(t, string(out)+stderr.String(), want[i], "%s", b)
	}
}

// TestServeWorkerKilledMidResponse runs 'tulip serve --no-worker' with its
// worker in another process, which dies (SIGKILL) mid-response: after
// billing made the refund, before its activity completed. A client
// streams the response meanwhile; a second worker process started after
// the first died finishes the run: the stream ends with
// response.completed, the answer whole, and billing made one refund.
func TestServeWorkerKilledMidResponse(t *testing.T) {
	bin := crashWorker(t)
	bill, err := billing.Start()
	require.NoError(t, err)
	t.Cleanup(bill.Close)
	m := newServeModel(t, 100*time.Millisecond)
	tq := taskQueue(t.Name())
	args := []string{"-address", server.Address(), "-task-queue", tq, "-billing", bill.URL(), "-openai", m.URL + "/v1", "-openai-name", "openai"}
	first := startWorkerProcess(t, bin, append(args, "-crash-at", "after-billing", "-marker", filepath.Join(t.TempDir(), "marker"))...)
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq)
	oc := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithMaxRetries(0))

	ctx := ctxT(t)
	stream := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "support",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please refund ord-3")}})
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	second := make(chan struct{})
	go func() {
		// The first worker kills itself at the refund: start the next.
		select {
		case <-exited:
		case <-ctx.Done():
			return
		}
		w := startWorkerProcess(t, bin, args...)
		t.Cleanup(func() { _ = w.Process.Signal(os.Interrupt); _ = w.Wait() })
		close(second)
	}()
	var types []string
	var text strings.Builder
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed", "response.failed", "response.incomplete":
			final = ev.Response
		}
	}
	require.NoError(t, stream.Err())
	select {
	case <-second:
	default:
		t.Fatal("the first worker did not die at the refund")
	}
	require.NotEmpty(t, types)
	assert.Equal(t, "response.completed", types[len(types)-1], "%v", types)
	assert.Equal(t, "Done: all settled.", text.String())
	assert.Equal(t, "Done: all settled.", final.OutputText())
	assert.Len(t, bill.Refunds(), 1, "billing made one refund across the crash")
}

// TestServeUsage: 'tulip serve' needs a model for its worker unless
// --no-worker, knows its hooks, and reads its token file.
func TestServeUsage(t *testing.T) {
	_, stderr, code := runCLI(t, "serve")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "usage: tulip serve")
	_, stderr, code = runCLI(t, "serve", "--no-worker", "--hooks", "nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown hook "nope"`)
	_, stderr, code = runCLI(t, "serve", "--no-worker", "--api-key-file", writeFile(t, "empty", "\n"))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "holds no token")
	stdout, _, code := runCLI(t, "serve", "--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"-listen", "-no-worker", "-api-key-file", "-agent", "-base-url", "-db"} {
		assert.Contains(t, stdout, f)
	}
}
