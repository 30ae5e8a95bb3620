package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/serve"
)

// 'tulip serve' as a company runs it (issue 54): multi-turn input as
// frameworks resend it, approvals answered once, refusals before a run
// starts, bounded requests, held client calls that end, long answers, and
// streams cut by a shutdown that resume on another instance. Every effect
// is counted where it lands: billing's witness, the toolbox's invocations.

// postJSON posts body to url and returns the status and the decoded JSON
// answer.
func postJSON(t *testing.T, url string, body any, header ...string) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	require.NoError(t, json.Unmarshal(data, &out), "a JSON answer: %s", data)
	return resp.StatusCode, out
}

// outputOf is a response object's output items.
func outputOf(obj map[string]any) []map[string]any {
	var out []map[string]any
	items, _ := obj["output"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

// itemsOfType are the output items of a type.
func itemsOfType(obj map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, it := range outputOf(obj) {
		if it["type"] == typ {
			out = append(out, it)
		}
	}
	return out
}

// TestServeResentHistory: frameworks send a multi-turn conversation by
// resending it (the AI SDK as item_references, the Agents SDK and
// LangChain as the output items with their ids). The request continues
// the thread its last answer names: the re-emitted refund is served,
// billing counts one. History this server never returned is refused, as
// is history that ends before its thread's last response.
func TestServeResentHistory(t *testing.T) {
	m := newServeModel(t, 10*time.Millisecond)
	tq := taskQueue(t.Name())
	bill, tb := serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq)
	url := base + "/v1/responses"

	st, r1 := postJSON(t, url, map[string]any{"model": "support", "input": "Please refund ord-31"})
	require.Equal(t, http.StatusOK, st, "%v", r1)
	msgs := itemsOfType(r1, "message")
	require.Len(t, msgs, 1)
	msgID := msgs[0]["id"].(string)
	thread := r1["metadata"].(map[string]any)["tulip_thread"]
	require.Equal(t, 1, refundsAsked(bill))

	t.Run("items resent with their ids", func(t *testing.T) {
		// The Agents SDK's and LangChain's shape: the output items as
		// they came (an mcp_call without its output), then the new
		// message.
		input := []any{map[string]any{"role": "user", "content": "Please refund ord-31"}}
		for _, it := range outputOf(r1) {
			it = copyItem(it)
			delete(it, "output")
			input = append(input, it)
		}
		input = append(input, map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "are you sure it went through?"}}})
		st, r2 := postJSON(t, url, map[string]any{"model": "support", "input": input})
		require.Equal(t, http.StatusOK, st, "%v", r2)
		assert.Equal(t, thread, r2["metadata"].(map[string]any)["tulip_thread"], "the same thread")
		calls := itemsOfType(r2, "mcp_call")
		require.NotEmpty(t, calls)
		assert.Equal(t, "cached", calls[0]["tulip"].(map[string]any)["outcome"], "the re-emitted refund is served from the thread's log")
		assert.Equal(t, 1, refundsAsked(bill), "billing refunded once")
		assert.Equal(t, 1, tb.Invocations()["issue_refund"])
		msgID = itemsOfType(r2, "message")[0]["id"].(string)
	})

	t.Run("item references", func(t *testing.T) {
		// The AI SDK's shape (store: true, its default).
		st, r3 := postJSON(t, url, map[string]any{"model": "support", "input": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Please refund ord-31"}}},
			map[string]any{"type": "item_reference", "id": "mcp_call-r1_executed"},
			map[string]any{"type": "item_reference", "id": msgID},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "are you sure? refund ord-31"}}},
		}})
		require.Equal(t, http.StatusOK, st, "%v", r3)
		assert.Equal(t, thread, r3["metadata"].(map[string]any)["tulip_thread"])
		calls := itemsOfType(r3, "mcp_call")
		require.NotEmpty(t, calls)
		assert.Equal(t, "cached", calls[0]["tulip"].(map[string]any)["outcome"])
		assert.Equal(t, 1, refundsAsked(bill), "billing refunded once")
	})

	t.Run("history that ends before the thread's last response", func(t *testing.T) {
		st, body := postJSON(t, url, map[string]any{"model": "support", "input": []any{
			map[string]any{"role": "user", "content": "Please refund ord-31"},
			map[string]any{"type": "message", "role": "assistant", "id": itemsOfType(r1, "message")[0]["id"], "content": []any{}},
			map[string]any{"role": "user", "content": "refund ord-31 again"},
		}})
		assert.Equal(t, http.StatusBadRequest, st)
		assert.Contains(t, body["error"].(map[string]any)["message"], "ends before its thread's last response")
		assert.Equal(t, 1, refundsAsked(bill))
	})

	t.Run("history no response of this server holds", func(t *testing.T) {
		for _, input := range [][]any{
			{map[string]any{"role": "user", "content": "refund ord-32"}, map[string]any{"role": "assistant", "content": "Done."},
				map[string]any{"role": "user", "content": "refund ord-32 again"}},
			{map[string]any{"role": "user", "content": "refund ord-32"}, map[string]any{"type": "item_reference", "id": "msg_forged"},
				map[string]any{"role": "user", "content": "refund ord-32 again"}},
		} {
			st, body := postJSON(t, url, map[string]any{"model": "support", "input": input})
			assert.Equal(t, http.StatusBadRequest, st)
			assert.Equal(t, "input", body["error"].(map[string]any)["param"])
		}
		assert.Equal(t, 1, refundsAsked(bill), "nothing started")
	})
}

// copyItem is a shallow copy of an item.
func copyItem(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestServeApprovalOnce: an approval answered twice at once is answered
// once: one answer is taken, the other gets 409 approval_answered naming
// what stands, and the held call ran at most once, as the winner said.
// The answer can come as frameworks send it: the conversation resent,
// the approval's authenticated id naming the run, no
// previous_response_id.
func TestServeApprovalOnce(t *testing.T) {
	m := newServeModel(t, 10*time.Millisecond)
	tq := taskQueue(t.Name())
	_, tb := serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq, "--hooks", "approve_isolate_host")
	url := base + "/v1/responses"

	for trial := range 4 {
		host := fmt.Sprintf("web-%d", trial)
		st, r1 := postJSON(t, url, map[string]any{"model": "support", "input": "isolate " + host})
		require.Equal(t, http.StatusOK, st, "%v", r1)
		assert.Equal(t, "completed", r1["status"], "an approval request completes its response, as OpenAI's does")
		asks := itemsOfType(r1, "mcp_approval_request")
		require.Len(t, asks, 1)
		ask := asks[0]
		before := tb.Invocations()["isolate_host"]

		// Two answers at once, as frameworks send them: the whole
		// conversation and the answer, no previous_response_id.
		answer := func(approve bool) (int, map[string]any) {
			input := []any{map[string]any{"role": "user", "content": "isolate " + host}, ask,
				map[string]any{"type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": approve}}
			return postJSON(t, url, map[string]any{"model": "support", "input": input})
		}
		var wg sync.WaitGroup
		var sts [2]int
		var bodies [2]map[string]any
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sts[i], bodies[i] = answer(i == 0)
			}()
		}
		wg.Wait()
		ok, conflict := -1, -1
		for i := range 2 {
			switch sts[i] {
			case http.StatusOK:
				ok = i
			case http.StatusConflict:
				conflict = i
			}
		}
		require.True(t, ok >= 0 && conflict >= 0, "one 200 and one 409: %v %v", sts, bodies)
		assert.Equal(t, "approval_answered", errCode(bodies[conflict]))
		ran := tb.Invocations()["isolate_host"] - before
		if ok == 0 { // the approval won
			assert.Equal(t, 1, ran)
			assert.Contains(t, bodies[conflict]["error"].(map[string]any)["message"], "approved")
		} else {
			assert.Equal(t, 0, ran)
			assert.Contains(t, bodies[conflict]["error"].(map[string]any)["message"], "declined")
		}
	}

	t.Run("an answer resent in later history is history", func(t *testing.T) {
		// The AI SDK resends an answered approval with every later turn.
		st, r1 := postJSON(t, url, map[string]any{"model": "support", "input": "isolate db-7"})
		require.Equal(t, http.StatusOK, st)
		ask := itemsOfType(r1, "mcp_approval_request")[0]
		st, r2 := postJSON(t, url, map[string]any{"model": "support", "input": []any{
			map[string]any{"role": "user", "content": "isolate db-7"},
			map[string]any{"type": "item_reference", "id": ask["id"]},
			map[string]any{"type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": true}}})
		require.Equal(t, http.StatusOK, st, "%v", r2)
		input := []any{map[string]any{"role": "user", "content": "isolate db-7"},
			map[string]any{"type": "item_reference", "id": ask["id"]},
			map[string]any{"type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": true}}
		for _, it := range outputOf(r2) {
			input = append(input, map[string]any{"type": "item_reference", "id": it["id"]})
		}
		input = append(input, map[string]any{"role": "user", "content": "thanks"})
		st, r3 := postJSON(t, url, map[string]any{"model": "support", "input": input})
		require.Equal(t, http.StatusOK, st, "%v", r3)
		assert.Equal(t, r1["metadata"].(map[string]any)["tulip_thread"], r3["metadata"].(map[string]any)["tulip_thread"])
		assert.Equal(t, "completed", r3["status"])
	})
}

// TestServeRefusesBeforeStart: with the one stream slot held, a streamed
// refund request is refused (429) before its run starts: billing counts
// 0, and a retry without previous_response_id cannot refund twice. With
// an Idempotency-Key, a retried request reaches the run its first try
// started.
func TestServeRefusesBeforeStart(t *testing.T) {
	m := newServeModel(t, 400*time.Millisecond)
	tq := taskQueue(t.Name())
	bill, _ := serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq, "--max-streams", "1")
	url := base + "/v1/responses"

	// Hold the slot: a slow streamed answer.
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	b, _ := json.Marshal(map[string]any{"model": "support", "input": "tell me slowly", "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	held, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer held.Body.Close()
	require.Equal(t, http.StatusOK, held.StatusCode)
	_, err = bufio.NewReader(held.Body).ReadString('\n') // the stream is open
	require.NoError(t, err)

	st, body := postJSON(t, url, map[string]any{"model": "support", "input": "Please refund ord-41", "stream": true})
	assert.Equal(t, http.StatusTooManyRequests, st)
	assert.Equal(t, "too_many_streams", errCode(body))
	// Had a run started, its refund would reach billing within a second.
	time.Sleep(2 * time.Second)
	assert.Equal(t, 0, refundsAsked(bill), "the refused request started nothing")
	cancel()

	t.Run("idempotency key", func(t *testing.T) {
		key := fmt.Sprintf("retry-%d", time.Now().UnixNano())
		st1, r1 := postJSON(t, url, map[string]any{"model": "support", "input": "Please refund ord-42"}, "Idempotency-Key", key)
		require.Equal(t, http.StatusOK, st1, "%v", r1)
		st2, r2 := postJSON(t, url, map[string]any{"model": "support", "input": "Please refund ord-42"}, "Idempotency-Key", key)
		require.Equal(t, http.StatusOK, st2, "%v", r2)
		assert.Equal(t, r1["id"], r2["id"], "the retry reaches the first try's response")
		assert.Equal(t, 1, refundsAsked(bill), "refunded once")
		st3, _ := postJSON(t, url, map[string]any{"model": "support", "input": "Please refund ord-42"}, "Idempotency-Key", key+"-other")
		require.Equal(t, http.StatusOK, st3)
		assert.Equal(t, 2, refundsAsked(bill), "control: another key is another request")
	})
}

// TestServeBoundsAndShapes: a request's work is bounded before anything
// runs, and every refusal is in OpenAI's error shape.
func TestServeBoundsAndShapes(t *testing.T) {
	m := newServeModel(t, 10*time.Millisecond)
	tq := taskQueue(t.Name())
	bill, _ := serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq, "--max-body", "16777216")
	url := base + "/v1/responses"
	tool := func(name string, params any) map[string]any {
		return map[string]any{"type": "function", "name": name, "parameters": params}
	}
	deep := any(map[string]any{"type": "string"})
	for range 40 {
		deep = map[string]any{"type": "object", "properties": map[string]any{"x": deep}}
	}
	many := make([]any, 100_000)
	for i := range many {
		many[i] = tool(fmt.Sprintf("t%d", i), map[string]any{"type": "object"})
	}
	for _, c := range []struct {
		name  string
		tools []any
		param string
	}{
		{"100k tools", many, "tools"},
		{"129 tools", many[:129], "tools"},
		{"a deep schema", []any{tool("deep", deep)}, "tools[0].parameters"},
		{"a huge schema", []any{tool("huge", map[string]any{"description": strings.Repeat("x", 70_000)})}, "tools[0].parameters"},
		{"a bad name", []any{tool("no spaces", map[string]any{})}, "tools[0].name"},
		{"a twice-offered name", []any{tool("a", map[string]any{}), tool("a", map[string]any{})}, "tools[1].name"},
		{"another MCP server", []any{map[string]any{"type": "mcp", "server_label": "other"}}, "tools[0].server_label"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, body := postJSON(t, url, map[string]any{"model": "support", "input": "Please refund ord-51", "tools": c.tools})
			assert.Equal(t, http.StatusBadRequest, st)
			assert.Equal(t, c.param, body["error"].(map[string]any)["param"])
		})
	}
	t.Run("the tulip MCP server is the agent's own", func(t *testing.T) {
		st, body := postJSON(t, url, map[string]any{"model": "support", "input": "hello",
			"tools": []any{map[string]any{"type": "mcp", "server_label": "tulip", "server_url": "http://unused", "require_approval": "always"}}})
		assert.Equal(t, http.StatusOK, st, "%v", body)
	})
	assert.Equal(t, 0, refundsAsked(bill), "no refused request ran")

	t.Run("a long id is not echoed whole", func(t *testing.T) {
		long := "resp_" + strings.Repeat("A", 7<<20)
		st, body := postJSON(t, url, map[string]any{"model": "support", "input": "hi", "previous_response_id": long})
		assert.Equal(t, http.StatusNotFound, st)
		assert.Less(t, len(body["error"].(map[string]any)["message"].(string)), 200)
	})
	t.Run("headers over the bound", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/models", nil)
		req.Header.Set("X-Big", strings.Repeat("h", 100<<10))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body), "OpenAI's error shape")
		assert.Equal(t, "headers_too_large", errCode(body))
	})
}

// TestServeClientCallExpires: a framework loop that stops after one step
// (the AI SDK's default) never answers its client tool's call. Past the
// request's tulip_client_timeout the call is answered as not performed,
// the run answers, and the thread takes its next message.
func TestServeClientCallExpires(t *testing.T) {
	m := newServeModel(t, 10*time.Millisecond)
	tq := taskQueue(t.Name())
	serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq)
	url := base + "/v1/responses"
	client := map[string]any{"type": "function", "name": "lookup_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}
	// The scripted model calls lookup_weather for "weather in CITY".
	st, r1 := postJSON(t, url, map[string]any{"model": "support", "input": "weather in Paris", "tools": []any{client},
		"metadata": map[string]any{"tulip_client_timeout": "3s"}})
	require.Equal(t, http.StatusOK, st, "%v", r1)
	require.Len(t, itemsOfType(r1, "function_call"), 1, "%v", r1)

	// Nobody answers. The thread is busy until the timeout.
	st, busy := postJSON(t, url, map[string]any{"model": "support", "input": "hello?", "previous_response_id": r1["id"]})
	assert.Equal(t, http.StatusConflict, st)
	assert.Equal(t, "thread_busy", errCode(busy))
	var r2 map[string]any
	require.Eventually(t, func() bool {
		st, r2 = postJSON(t, url, map[string]any{"model": "support", "input": "hello?", "previous_response_id": r1["id"]})
		return st == http.StatusOK
	}, 30*time.Second, 500*time.Millisecond, "the thread takes a message once the call expired")
	assert.Equal(t, "completed", r2["status"])

	got, err := http.Get(base + "/v1/responses/" + r1["id"].(string))
	require.NoError(t, err)
	defer got.Body.Close()
	var back map[string]any
	require.NoError(t, json.NewDecoder(got.Body).Decode(&back))
	assert.Equal(t, "completed", back["status"], "the expired run answered")
	// The model was told the call was not performed.
	told := false
	for _, body := range m.requests() {
		raw, _ := json.Marshal(body["messages"])
		told = told || strings.Contains(string(raw), "did not return the result within 3s")
	}
	assert.True(t, told, "the model read that the client's call was not performed")
}

// sseRead reads server-sent events until the stream ends, each as its
// data object.
func sseRead(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		out = append(out, ev)
	}
	return out
}

// TestServeShutdownResumesElsewhere: at shutdown an in-flight stream ends
// with an error event that says where to resume; another instance (the
// same Temporal server, the same id key) resumes it from that cursor to
// its end.
func TestServeShutdownResumesElsewhere(t *testing.T) {
	m := newServeModel(t, 2*time.Second) // 6 pieces: 12 s, still streaming when the second instance reads
	tq := taskQueue(t.Name())
	serveWorker(t, server.Address(), tq, m)
	idKey := writeFile(t, "idkey", strings.Repeat("ab", 32)+"\n")
	args := []string{"--address", server.Address(), "--no-worker", "--task-queue", tq, "--id-key-file", idKey}

	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), &out, &errb)
	}()
	t.Cleanup(cancel)
	var base string
	require.Eventually(t, func() bool {
		if mm := serveURLRE.FindStringSubmatch(out.String()); mm != nil {
			base = mm[1]
			return true
		}
		return false
	}, 90*time.Second, 50*time.Millisecond)

	b, _ := json.Marshal(map[string]any{"model": "support", "input": "tell me slowly", "stream": true})
	resp, err := http.Post(base+"/v1/responses", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// Read until the first text delta, then shut the server down.
	var first []map[string]any
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			first = append(first, ev)
			if ev["type"] == "response.output_text.delta" {
				break
			}
		}
	}
	cancel()
	rest := sseRead(t, br)
	require.NotEmpty(t, rest)
	last := rest[len(rest)-1]
	require.Equal(t, "error", last["type"], "the cut stream ends with an error event: %v", last)
	assert.Equal(t, "server_shutting_down", last["code"])
	ext := last["tulip"].(map[string]any)
	after := int64(ext["starting_after"].(float64))
	respID := ext["response_id"].(string)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("tulip serve did not stop")
	}

	// Another instance resumes the stream from the cursor.
	base2, _ := startServe(t, args...)
	got, err := http.Get(fmt.Sprintf("%s/v1/responses/%s?stream=true&starting_after=%d", base2, respID, after))
	require.NoError(t, err)
	defer got.Body.Close()
	require.Equal(t, http.StatusOK, got.StatusCode)
	resumed := sseRead(t, got.Body)
	require.NotEmpty(t, resumed)
	assert.Equal(t, "response.completed", resumed[len(resumed)-1]["type"])
	var text strings.Builder
	for _, ev := range append(append(first, rest[:len(rest)-1]...), resumed...) {
		if ev["type"] == "response.output_text.delta" {
			text.WriteString(ev["delta"].(string))
		}
	}
	for _, ev := range resumed {
		assert.Greater(t, int64(ev["sequence_number"].(float64)), after, "only events after the cursor")
	}
	assert.Equal(t, "Slowly but surely, the run ends.", text.String(), "every piece once, across both instances")
}

// TestServeLongAnswer: a model answer streamed over 72 s (past the old
// fixed 60 s request timeout) completes, and the model is asked once.
func TestServeLongAnswer(t *testing.T) {
	t.Parallel()
	m := newServeModel(t, 12*time.Second) // 6 pieces: 72 s
	tq := taskQueue(t.Name())
	serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"model": "support", "input": "tell me slowly", "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	evs := sseRead(t, resp.Body)
	require.NotEmpty(t, evs)
	assert.Equal(t, "response.completed", evs[len(evs)-1]["type"])
	var text strings.Builder
	for _, ev := range evs {
		if ev["type"] == "response.output_text.delta" {
			text.WriteString(ev["delta"].(string))
		}
	}
	assert.Equal(t, "Slowly but surely, the run ends.", text.String())
	assert.Len(t, m.requests(), 1, "the upstream was asked once")
}

// TestServeTextHistory measures what a streamed answer adds to its run's
// history: its text goes in pieces of about a second (one signal each),
// and an answer nobody streams adds no signal at all. The same answer
// (6 pieces over 6 s) is asked both ways.
func TestServeTextHistory(t *testing.T) {
	m := newServeModel(t, time.Second)
	tq := taskQueue(t.Name())
	serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq)
	c := dial(t, server.Address())
	signals := func(thread, run string) int {
		n := 0
		it := c.GetWorkflowHistory(ctxT(t), thread, run, false, 0)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if ev.GetWorkflowExecutionSignaledEventAttributes() != nil {
				n++
			}
		}
		return n
	}
	// Unstreamed.
	st, r1 := postJSON(t, base+"/v1/responses", map[string]any{"model": "support", "input": "tell me slowly"})
	require.Equal(t, http.StatusOK, st, "%v", r1)
	md := r1["metadata"].(map[string]any)
	quiet := signals(md["tulip_thread"].(string), md["tulip_run"].(string))

	// Streamed.
	b, _ := json.Marshal(map[string]any{"model": "support", "input": "tell me slowly", "stream": true})
	resp, err := http.Post(base+"/v1/responses", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	evs := sseRead(t, resp.Body)
	require.Equal(t, "response.completed", evs[len(evs)-1]["type"])
	done := evs[len(evs)-1]["response"].(map[string]any)["metadata"].(map[string]any)
	streamed := signals(done["tulip_thread"].(string), done["tulip_run"].(string))
	t.Logf("a 6 s answer: %d signals streamed, %d unstreamed", streamed, quiet)
	assert.Zero(t, quiet, "an answer nobody streams adds no signal")
	assert.Positive(t, streamed, "the streamed answer's text went through the run")
	assert.LessOrEqual(t, streamed, 9, "about one signal a second of text")
}

// TestServeTwoInstances: two 'tulip serve' processes behind one address
// (a round-robin proxy) on one Temporal server, sharing the id key from a
// file: a response made by one is read, continued and approved through
// the other; a keyed request retried on the other reaches the same run;
// and two messages at once on one thread, one through each, start one
// run between them.
func TestServeTwoInstances(t *testing.T) {
	m := newServeModel(t, 10*time.Millisecond)
	tq := taskQueue(t.Name())
	bill, tb := serveWorker(t, server.Address(), tq, m)
	idKey := filepath.Join(t.TempDir(), "shared.idkey") // made by the first, read by the second
	keys := writeFile(t, "keys", "two-instances-token\n")
	args := []string{"--address", server.Address(), "--no-worker", "--task-queue", tq, "--id-key-file", idKey, "--hooks", "approve_isolate_host", "--api-key-file", keys}
	a, _ := startServe(t, args...)
	b, _ := startServe(t, args...)
	var n atomic.Int64
	var hits [2]atomic.Int64
	backends := []*url.URL{mustURL(t, a), mustURL(t, b)}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		i := n.Add(1) % 2
		hits[i].Add(1)
		pr.SetURL(backends[i])
	}})
	t.Cleanup(proxy.Close)
	auth := []string{"Authorization", "Bearer two-instances-token"}
	// Every request goes through the proxy, which alternates: each next
	// request reaches the other instance.
	url := func(int) string { return proxy.URL + "/v1/responses" }

	st, r1 := postJSON(t, url(0), map[string]any{"model": "support", "input": "Please refund ord-61"}, auth...)
	require.Equal(t, http.StatusOK, st, "%v", r1)
	req, _ := http.NewRequest(http.MethodGet, proxy.URL+"/v1/responses/"+r1["id"].(string), nil)
	req.Header.Set(auth[0], auth[1])
	got, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got.Body.Close()
	assert.Equal(t, http.StatusOK, got.StatusCode, "read back through the other instance")
	st, r2 := postJSON(t, url(1), map[string]any{"model": "support", "input": "are you sure it went through?", "previous_response_id": r1["id"]}, auth...)
	require.Equal(t, http.StatusOK, st, "%v", r2)
	assert.Equal(t, "cached", itemsOfType(r2, "mcp_call")[0]["tulip"].(map[string]any)["outcome"])
	assert.Equal(t, 1, refundsAsked(bill))

	// An approval asked through one, answered through the other.
	st, h1 := postJSON(t, url(0), map[string]any{"model": "support", "input": "isolate web-61"}, auth...)
	require.Equal(t, http.StatusOK, st)
	ask := itemsOfType(h1, "mcp_approval_request")[0]
	st, h2 := postJSON(t, url(1), map[string]any{"model": "support", "input": []any{
		map[string]any{"type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": true}}}, auth...)
	require.Equal(t, http.StatusOK, st, "%v", h2)
	assert.Equal(t, 1, tb.Invocations()["isolate_host"])

	// A keyed request retried on the other instance.
	key := fmt.Sprintf("two-%d", time.Now().UnixNano())
	st, k1 := postJSON(t, url(0), map[string]any{"model": "support", "input": "Please refund ord-62"}, append([]string{"Idempotency-Key", key}, auth...)...)
	require.Equal(t, http.StatusOK, st)
	st, k2 := postJSON(t, url(1), map[string]any{"model": "support", "input": "Please refund ord-62"}, append([]string{"Idempotency-Key", key}, auth...)...)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, k1["id"], k2["id"])
	assert.Equal(t, 2, refundsAsked(bill), "ord-61 once, ord-62 once")

	// Two messages at once on one thread, one through each instance.
	var wg sync.WaitGroup
	var sts [2]int
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sts[i], _ = postJSON(t, url(i), map[string]any{"model": "support", "input": "Please refund ord-63", "previous_response_id": r2["id"]}, auth...)
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, sts[:], "one run between them")
	assert.Equal(t, 3, refundsAsked(bill), "ord-63 once")
	assert.Positive(t, hits[0].Load())
	assert.Positive(t, hits[1].Load())
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestServeHandlerEmbedded: the API as a package (serve.Handler) in a
// plain net/http server, its tenants from the company's own function of
// the request: a refund runs once, and another tenant cannot read it.
func TestServeHandlerEmbedded(t *testing.T) {
	m := newServeModel(t, 10*time.Millisecond)
	tq := taskQueue(t.Name())
	bill, tb := serveWorker(t, server.Address(), tq, m)
	api, err := serve.NewHandler(dial(t, server.Address()), serve.Options{TaskQueue: tq,
		IDKey: []byte("0123456789abcdef0123456789abcdef"),
		Tenant: func(r *http.Request) (string, error) {
			if org := r.Header.Get("X-Verified-Org"); org != "" {
				return org, nil
			}
			return "", fmt.Errorf("sign in first")
		}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	st, r1 := postJSON(t, srv.URL+"/v1/responses", map[string]any{"model": "support", "input": "Please refund ord-71"}, "X-Verified-Org", "acme")
	require.Equal(t, http.StatusOK, st, "%v", r1)
	assert.Equal(t, "Done: all settled.", itemsOfType(r1, "message")[0]["content"].([]any)[0].(map[string]any)["text"])
	assert.Equal(t, 1, refundsAsked(bill))
	assert.True(t, strings.HasPrefix(r1["metadata"].(map[string]any)["tulip_thread"].(string), "tulip-serve/acme/"), "the thread is acme's")

	for org, want := range map[string]int{"acme": http.StatusOK, "globex": http.StatusNotFound} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/responses/"+r1["id"].(string), nil)
		req.Header.Set("X-Verified-Org", org)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, org)
	}
	st, _ = postJSON(t, srv.URL+"/v1/responses", map[string]any{"model": "support", "input": "hi"})
	assert.Equal(t, http.StatusUnauthorized, st, "no tenant, no run")

	// The run's history, saved from Go for a replay test (issue 55, item
	// 5), replays with the worker's tools.
	files, err := agent.SaveHistory(ctxT(t), dial(t, server.Address()), r1["metadata"].(map[string]any)["tulip_thread"].(string),
		filepath.Join(t.TempDir(), "refund.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	assert.NoError(t, workerplugin.ReplayHistories(workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks()}, workerplugin.ReplayOptions{}, files...))
}

// TestServeShutdownOpenAIClient: the official Go client sees a shutdown:
// its stream ends with an error that says where to resume, not a silent
// end that reads as an answer still in progress.
func TestServeShutdownOpenAIClient(t *testing.T) {
	m := newServeModel(t, time.Second)
	tq := taskQueue(t.Name())
	serveWorker(t, server.Address(), tq, m)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--address", server.Address(), "--no-worker", "--task-queue", tq}, &out, &errb)
	}()
	t.Cleanup(cancel)
	var base string
	require.Eventually(t, func() bool {
		if mm := serveURLRE.FindStringSubmatch(out.String()); mm != nil {
			base = mm[1]
			return true
		}
		return false
	}, 90*time.Second, 50*time.Millisecond)
	oc := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	st := oc.Responses.NewStreaming(ctxT(t), responses.ResponseNewParams{Model: "support",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me slowly")}})
	deltas := 0
	for st.Next() {
		if st.Current().Type == "response.output_text.delta" {
			if deltas++; deltas == 1 {
				cancel() // shut the server down mid-answer
			}
		}
	}
	require.Error(t, st.Err(), "the client sees the cut stream as an error")
	assert.Contains(t, st.Err().Error(), "shutting down")
	assert.Contains(t, st.Err().Error(), "starting_after=")
	<-done
}
