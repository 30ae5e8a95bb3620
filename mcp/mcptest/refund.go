// Package mcptest serves MCP tools for tests of tulip's MCP toolsets: a
// refund service over Streamable HTTP on loopback (a real MCP server, the
// Go SDK's), whose check tool follows the convention of
// mcp.Server.Checks, and a fault that loses a call's answer after its
// effect.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaKey is where tulip puts a call's idempotency key in _meta
// (mcp.MetaIdempotencyKey; this package does not import mcp, whose own
// tests use it).
const metaKey = "io.tulip/idempotency-key"

// RefundServer is a refund service as an MCP server. Its tool "refund"
// ({"order": ID}) refunds the order every time it is called, as a service
// that ignores idempotency keys does, and answers {"refund_id": ...}; it
// remembers each call's key. Its tool "refund_status" answers tulip's
// check question ({"idempotency_key", "tool", "arguments"}) with
// {"applied": true, "result": {"refund_id": ...}} or {"applied": false}.
// Safe for concurrent use.
type RefundServer struct {
	// URL is the server's endpoint, for mcp.Server.URL.
	URL string

	srv        *httptest.Server
	mu         sync.Mutex
	refunds    map[string]int    // order -> refunds made
	byKey      map[string]string // key -> refund id
	loseNext   atomic.Bool
	refuseNext atomic.Bool
	badAnswer  atomic.Bool
	handler    atomic.Pointer[sdk.StreamableHTTPHandler]
	newHandler func() *sdk.StreamableHTTPHandler
	closeOnce  sync.Once
}

// NewRefundServer starts a RefundServer. Close it when done.
func NewRefundServer() *RefundServer {
	rs := &RefundServer{refunds: map[string]int{}, byKey: map[string]string{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "refunds", Version: "1"}, nil)
	type args struct {
		Order string `json:"order"`
	}
	type receipt struct {
		RefundID string `json:"refund_id"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "refund", Description: "Refund an order."},
		func(_ context.Context, req *sdk.CallToolRequest, a args) (*sdk.CallToolResult, receipt, error) {
			key, _ := req.Params.Meta[metaKey].(string)
			rs.mu.Lock()
			defer rs.mu.Unlock()
			rs.refunds[a.Order]++
			id := fmt.Sprintf("re-%s-%d", a.Order, rs.refunds[a.Order])
			rs.byKey[key] = id
			return nil, receipt{RefundID: id}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "refund_status", Description: "Whether a refund was applied, by its idempotency key.",
		InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var q struct {
				Key       string          `json:"idempotency_key"`
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &q); err != nil || q.Tool != "refund" || len(q.Arguments) == 0 {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "refund_status: not a check question"}}}, nil
			}
			rs.mu.Lock()
			id, ok := rs.byKey[q.Key]
			rs.mu.Unlock()
			answer := map[string]any{"applied": ok}
			if ok {
				answer["result"] = receipt{RefundID: id}
			}
			if rs.badAnswer.Load() {
				answer = map[string]any{"status": "done"}
			}
			b, _ := json.Marshal(answer)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
		})
	rs.newHandler = func() *sdk.StreamableHTTPHandler {
		return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: true})
	}
	rs.handler.Store(rs.newHandler())
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := rs.handler.Load()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		refund := r.Method == http.MethodPost && bytes.Contains(body, []byte(`"name":"refund"`))
		switch {
		case refund && rs.refuseNext.CompareAndSwap(true, false):
			http.Error(w, "busy", http.StatusServiceUnavailable) // turned away, not handled
		case refund && rs.loseNext.CompareAndSwap(true, false):
			h.ServeHTTP(httptest.NewRecorder(), r) // the refund is made
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close() // and its answer lost with the connection
			}
		default:
			h.ServeHTTP(w, r)
		}
	}))
	rs.URL = rs.srv.URL
	return rs
}

// LoseNextAnswer makes the next refund's connection close after the
// refund was made and before its answer: the caller cannot tell whether
// it ran.
func (rs *RefundServer) LoseNextAnswer() { rs.loseNext.Store(true) }

// RefuseNext makes the server turn the next refund away unhandled (503
// Service Unavailable).
func (rs *RefundServer) RefuseNext() { rs.refuseNext.Store(true) }

// ForgetSessions makes the server forget its sessions, as a restarted
// server does: a request of an old session is answered 404 Not Found,
// unhandled.
func (rs *RefundServer) ForgetSessions() { rs.handler.Store(rs.newHandler()) }

// AnswerBadly makes refund_status answer in another form than the
// convention's (on), or as it should (off).
func (rs *RefundServer) AnswerBadly(on bool) { rs.badAnswer.Store(on) }

// Refunds counts the refunds made for order: the witness.
func (rs *RefundServer) Refunds(order string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.refunds[order]
}

// Close stops the server: its open streams first (the standalone SSE
// stream of a connected client would hold httptest's Close). Safe to call
// more than once.
func (rs *RefundServer) Close() {
	rs.closeOnce.Do(func() {
		rs.srv.CloseClientConnections()
		rs.srv.Close()
	})
}
