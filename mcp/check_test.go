package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
)

// refundServer is an MCP server over Streamable HTTP on loopback with a
// "refund" tool, which refunds an order every time it is called (it
// ignores the key, as many services do, but remembers it), and a
// "refund_status" tool that follows the check convention. breakNext
// makes the next refund's connection close after the refund was made
// and before its answer.
type refundServer struct {
	*httptest.Server
	mu        sync.Mutex
	refunds   map[string]int    // order -> refunds made
	byKey     map[string]string // key -> refund id
	breakNext atomic.Bool
	statusBad atomic.Bool // refund_status answers in another form
	once      sync.Once
}

type refundArgs struct {
	Order string `json:"order"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
}

func newRefundServer(t *testing.T) *refundServer {
	rs := &refundServer{refunds: map[string]int{}, byKey: map[string]string{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "refunds", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "refund", Description: "Refund an order."},
		func(_ context.Context, req *sdk.CallToolRequest, a refundArgs) (*sdk.CallToolResult, refundOut, error) {
			key, _ := req.Params.Meta[MetaIdempotencyKey].(string)
			rs.mu.Lock()
			defer rs.mu.Unlock()
			rs.refunds[a.Order]++
			id := fmt.Sprintf("re-%s-%d", a.Order, rs.refunds[a.Order])
			rs.byKey[key] = id
			return nil, refundOut{RefundID: id}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "refund_status", Description: "Whether a refund key was applied.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var q struct {
				Key       string          `json:"idempotency_key"`
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &q); err != nil || q.Tool != "refund" || len(q.Arguments) == 0 {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "bad question"}}}, nil
			}
			rs.mu.Lock()
			id, ok := rs.byKey[q.Key]
			rs.mu.Unlock()
			answer := map[string]any{"applied": ok}
			if ok {
				answer["result"] = refundOut{RefundID: id}
			}
			if rs.statusBad.Load() {
				answer = map[string]any{"status": "done"}
			}
			b, _ := json.Marshal(answer)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: true})
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"name":"refund"`)) && rs.breakNext.CompareAndSwap(true, false) {
			// The refund is made; its answer is lost with the connection.
			h.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(rs.stop)
	return rs
}

// stop closes the server: its open streams first (Close waits for them).
func (rs *refundServer) stop() {
	rs.once.Do(func() {
		rs.CloseClientConnections()
		rs.Close()
	})
}

func (rs *refundServer) count(order string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.refunds[order]
}

// A connection that breaks after the request was sent leaves the call's
// outcome unknown: tulip.Ambiguous (retryable, unless the tool holds or
// checks), and the server did refund. The check tool named in the
// server's config answers: applied, with the refund, for that key; not
// applied for another. One that was never sent (nothing listens) is a
// transport error.
func TestCheckNamedByServerConfig(t *testing.T) {
	rs := newRefundServer(t)
	srv := Server{Name: "refunds", URL: rs.URL, Checks: map[string]string{"refund": "refund_status"}}
	ts := newToolset(t, srv, Options{})
	infos := annotations(t, ts)
	assert.Equal(t, "check", infos["refund"].Spec.OnUnknown, "a tool with a check checks, trusted or not")
	assert.Equal(t, "refund_status", infos["refund"].Behaviour.Check)
	assert.Equal(t, "runs every time; if lost, asks refund_status", infos["refund"].Behaviour.String())

	in := tulip.ToolInput{Tool: "refund", CallID: "c1", IdempotencyKey: "refund:c1", Arguments: `{"order": "o-1"}`}
	rs.breakNext.Store(true)
	_, err := ts.Call(ctxT(t), in)
	ae := appErr(t, err)
	assert.Equal(t, string(tulip.Ambiguous), ae.Type(), "%v", err)
	assert.False(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), "may have run")
	assert.Equal(t, 1, rs.count("o-1"), "the server refunded")

	res, applied, err := ts.Check(ctxT(t), in)
	require.NoError(t, err)
	assert.True(t, applied)
	assert.JSONEq(t, `{"refund_id": "re-o-1-1"}`, string(res))

	res, applied, err = ts.Check(ctxT(t), tulip.ToolInput{Tool: "refund", CallID: "c2", IdempotencyKey: "refund:c2", Arguments: `{"order": "o-2"}`})
	require.NoError(t, err)
	assert.False(t, applied)
	assert.Nil(t, res)
	assert.Equal(t, 1, rs.count("o-1"), "a check refunds nothing")

	// Answers of another form fail the check, non-retryably.
	rs.statusBad.Store(true)
	_, _, err = ts.Check(ctxT(t), in)
	ae = appErr(t, err)
	assert.Equal(t, ErrCheckAnswer, ae.Type(), "%v", err)
	assert.True(t, ae.NonRetryable())
	rs.statusBad.Store(false)

	// A tool without a check has none to ask.
	_, _, err = ts.Check(ctxT(t), tulip.ToolInput{Tool: "refund_status", Arguments: `{}`})
	assert.Equal(t, ErrUnknownTool, appErr(t, err).Type())

	// Nothing listens: the request was never sent.
	rs.stop()
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "refund", CallID: "c3", IdempotencyKey: "refund:c3", Arguments: `{"order": "o-3"}`})
	ae = appErr(t, err)
	assert.Equal(t, ErrTransport, ae.Type(), "%v", err)
	assert.False(t, ae.NonRetryable())
}

// A check that names a tool the server does not list fails the listing,
// naming it; Validate refuses a tool checking itself.
func TestCheckConfigRefused(t *testing.T) {
	rs := newRefundServer(t)
	for _, checks := range []map[string]string{{"refund": "refund_lookup"}, {"refnud": "refund_status"}} {
		ts := newToolset(t, Server{Name: "refunds", URL: rs.URL, Checks: checks}, Options{})
		_, err := ts.Tools(ctxT(t))
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "Checks", ce.Field)
		t.Log(err)
	}
	err := Server{Name: "refunds", URL: rs.URL, Checks: map[string]string{"refund": "refund"}}.Validate()
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "cannot check itself"), err.Error())
}
