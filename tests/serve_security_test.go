package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// post sends a JSON body to 'tulip serve' with the given token and extra
// headers, and returns the status and the decoded body.
func post(t *testing.T, url, token string, body any, headers ...string) (int, map[string]any, http.Header) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, resp.Header
}

func get(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func errCode(body map[string]any) any {
	e, _ := body["error"].(map[string]any)
	return e["code"]
}

// TestServeTenants: response ids are authenticated and a thread belongs to
// the tenant that made it. A forged or altered id is a 404; another
// tenant's continue, read, stream and approve are 404s; errors name no run.
func TestServeTenants(t *testing.T) {
	m := newServeModel(t, 0)
	tq := taskQueue(t.Name())
	bill, tb := serveWorker(t, server.Address(), tq, m)
	keys := writeFile(t, "keys", "# tenants\nacme acme-token-1234\nglobex globex-token-5678\n")
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq,
		"--hooks", "approve_isolate_host", "--api-key-file", keys, "--id-key-file", writeFile(t, "idkey", strings.Repeat("ab", 32)))
	url := base + "/v1/responses"

	code, r1, _ := post(t, url, "acme-token-1234", map[string]any{"model": "support", "input": "Please refund ord-31"})
	require.Equal(t, http.StatusOK, code, "%v", r1)
	id := r1["id"].(string)
	assert.Less(t, len(id), 100, "a response id stays short: %s", id)
	assert.Equal(t, 1, refundsAsked(bill))

	t.Run("forged and altered ids", func(t *testing.T) {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, "resp_"))
		require.NoError(t, err)
		for i := range []int{0, len(raw) / 2, len(raw) - 1} {
			alt := append([]byte(nil), raw...)
			alt[[]int{0, len(raw) / 2, len(raw) - 1}[i]] ^= 1
			bad := "resp_" + base64.RawURLEncoding.EncodeToString(alt)
			code, body, _ := post(t, url, "acme-token-1234", map[string]any{"model": "support", "previous_response_id": bad, "input": "are you sure?"})
			assert.Equal(t, http.StatusNotFound, code, "altered byte %d: %v", i, body)
			code, _ = get(t, base+"/v1/responses/"+bad, "acme-token-1234")
			assert.Equal(t, http.StatusNotFound, code)
		}
		// The old scheme's shape: unsigned base64 of "thread\nrun\n0".
		forged := "resp_" + base64.RawURLEncoding.EncodeToString([]byte(r1["metadata"].(map[string]any)["tulip_thread"].(string)+"\n"+r1["metadata"].(map[string]any)["tulip_run"].(string)+"\n0"))
		code, _, _ := post(t, url, "acme-token-1234", map[string]any{"model": "support", "previous_response_id": forged, "input": "are you sure?"})
		assert.Equal(t, http.StatusNotFound, code)
	})

	t.Run("another tenant", func(t *testing.T) {
		code, body, _ := post(t, url, "globex-token-5678", map[string]any{"model": "support", "previous_response_id": id, "input": "are you sure?"})
		assert.Equal(t, http.StatusNotFound, code, "continue: %v", body)
		code, _ = get(t, base+"/v1/responses/"+id, "globex-token-5678")
		assert.Equal(t, http.StatusNotFound, code, "read")
		code, _ = get(t, base+"/v1/responses/"+id+"?stream=true", "globex-token-5678")
		assert.Equal(t, http.StatusNotFound, code, "stream")

		// An approval held for acme: globex can neither see nor answer it.
		code, held, _ := post(t, url, "acme-token-1234", map[string]any{"model": "support", "input": "isolate web-31"})
		require.Equal(t, http.StatusOK, code, "%v", held)
		out := held["output"].([]any)
		ask := out[len(out)-1].(map[string]any)
		require.Equal(t, "mcp_approval_request", ask["type"])
		code, body, _ = post(t, url, "globex-token-5678", map[string]any{"model": "support", "previous_response_id": held["id"],
			"input": []any{map[string]any{"type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": true}}})
		assert.Equal(t, http.StatusNotFound, code, "approve: %v", body)
		assert.Equal(t, 0, tb.Invocations()["isolate_host"], "globex's approval ran nothing")

		// Chat threads by name: the same name is two threads.
		code, c1, _ := post(t, base+"/v1/chat/completions", "acme-token-1234", map[string]any{"model": "support",
			"messages": []any{map[string]any{"role": "user", "content": "Please refund ord-32"}}}, "X-Tulip-Thread", "customer-32")
		require.Equal(t, http.StatusOK, code, "%v", c1)
		code, c2, _ := post(t, base+"/v1/chat/completions", "globex-token-5678", map[string]any{"model": "support",
			"messages": []any{map[string]any{"role": "user", "content": "are you sure?"}}}, "X-Tulip-Thread", "customer-32")
		require.Equal(t, http.StatusOK, code, "%v", c2)
		assert.NotContains(t, fmt.Sprint(c2), "ord-32", "globex's thread of the same name does not hold acme's turn")
		assert.Equal(t, 2, refundsAsked(bill))

		// A 409 names no run.
		code, busy, hdr := post(t, base+"/v1/chat/completions", "acme-token-1234", map[string]any{"model": "support",
			"messages": []any{map[string]any{"role": "user", "content": "isolate web-33"}}}, "X-Tulip-Thread", "ops-33")
		require.Equal(t, http.StatusOK, code, "%v", busy)
		code, busy, hdr = post(t, base+"/v1/chat/completions", "acme-token-1234", map[string]any{"model": "support",
			"messages": []any{map[string]any{"role": "user", "content": "hello"}}}, "X-Tulip-Thread", "ops-33")
		assert.Equal(t, http.StatusConflict, code)
		assert.Equal(t, "thread_busy", errCode(busy))
		assert.NotEmpty(t, hdr.Get("Retry-After"))
		msg := fmt.Sprint(busy)
		assert.NotRegexp(t, `[0-9a-f]{8}-[0-9a-f]{4}-`, msg, "the 409 names no run id")
	})
}

// TestServeRefusesBrowsers: without keys, what a web page of another
// origin can send is refused, and so is a Host that is not the server's;
// --allow-origin opens an origin; a non-loopback listen needs a key.
func TestServeRefusesBrowsers(t *testing.T) {
	m := newServeModel(t, 0)
	tq := taskQueue(t.Name())
	_, tb := serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq, "--allow-origin", "https://app.example")
	url := base + "/v1/responses"
	send := func(contentType, origin, host string) int {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"support","input":"Please refund ord-41"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusForbidden, send("text/plain", "https://evil.example", ""), "a cross-origin text/plain POST")
	assert.Equal(t, http.StatusUnsupportedMediaType, send("text/plain", "", ""))
	assert.Equal(t, http.StatusForbidden, send("application/json", "https://evil.example", ""))
	assert.Equal(t, http.StatusForbidden, send("application/json", "", "evil.example:80"), "DNS rebinding: a foreign Host")
	assert.Equal(t, 0, tb.Invocations()["issue_refund"], "nothing ran")
	assert.Equal(t, http.StatusOK, send("application/json", "https://app.example", ""), "an allowed origin")

	_, stderr, code := runCLI(t, "serve", "--no-worker", "--listen", "0.0.0.0:0")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "not a loopback address")
}

// TestServeOneRequestOneRun: 4 concurrent requests on one thread, 20
// times: each answer is its own request's, and every message either ran
// once (its own run) or got a 409.
func TestServeOneRequestOneRun(t *testing.T) {
	m := newServeModel(t, 0)
	tq := taskQueue(t.Name())
	bill, _ := serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq)
	ran, refused := 0, 0
	for trial := range 20 {
		thread := fmt.Sprintf("race-%d", trial)
		type answer struct {
			order string
			code  int
			body  map[string]any
		}
		answers := make([]answer, 4)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				order := fmt.Sprintf("ord-%d%02d", i+1, trial)
				code, body, _ := post(t, base+"/v1/chat/completions", "", map[string]any{"model": "support",
					"messages": []any{map[string]any{"role": "user", "content": "refund " + order}}}, "X-Tulip-Thread", thread)
				answers[i] = answer{order, code, body}
			}()
		}
		wg.Wait()
		ids := map[string]bool{}
		for _, a := range answers {
			switch a.code {
			case http.StatusOK:
				ran++
				ext := a.body["tulip"].(map[string]any)
				rid := ext["response_id"].(string)
				assert.False(t, ids[rid], "trial %d: two 200s share the response %s", trial, rid)
				ids[rid] = true
				calls, _ := json.Marshal(ext["calls"])
				assert.Contains(t, string(calls), a.order, "trial %d: the answer to %q is its own", trial, a.order)
			case http.StatusConflict:
				refused++
				assert.Equal(t, "thread_busy", errCode(a.body))
			default:
				t.Errorf("trial %d: %d %v", trial, a.code, a.body)
			}
		}
	}
	assert.Equal(t, ran, refundsAsked(bill), "every 200 is one refund; no 409 refunded")
	assert.Equal(t, 80, ran+refused)
	t.Logf("4 concurrent requests a thread, 20 trials: %d ran, %d refused 409", ran, refused)
}

// TestServeLimits: a 50 MiB body is a 413 with OpenAI's error shape; a
// reader that stops reading does not delay 20 parallel streams.
func TestServeLimits(t *testing.T) {
	m := newServeModel(t, 20*time.Millisecond)
	tq := taskQueue(t.Name())
	serveWorker(t, server.Address(), tq, m)
	base, _ := startServe(t, "--address", server.Address(), "--no-worker", "--task-queue", tq, "--write-timeout", "2s")
	url := base + "/v1/responses"

	big := bytes.Repeat([]byte("a"), 50<<20)
	body := append(append([]byte(`{"model":"support","input":"`), big...), `"}`...)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var e map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, "request_too_large", errCode(e))

	// A stalled reader: it asks for a long streamed answer and never reads.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	stalled := `{"model":"support","input":"slow ` + strings.Repeat("x", 100) + `","stream":true}`
	fmt.Fprintf(conn, "POST /v1/responses HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(base, "http://"), len(stalled), stalled)

	start := time.Now()
	var wg sync.WaitGroup
	times := make([]time.Duration, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			b, _ := json.Marshal(map[string]any{"model": "support", "input": fmt.Sprintf("hello %d", i), "stream": true})
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			last := ""
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: ") {
					last = sc.Text()
				}
			}
			assert.Equal(t, "event: response.completed", last)
			times[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	var worst time.Duration
	for _, d := range times {
		worst = max(worst, d)
	}
	t.Logf("20 parallel streams beside a stalled reader: all done in %s, the slowest %s", time.Since(start).Round(time.Millisecond), worst.Round(time.Millisecond))
}
