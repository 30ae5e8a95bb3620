package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// stdioServerEnv makes the test binary an MCP server on stdio (see
// TestMain): a child process to kill and to benchmark, without node.
const stdioServerEnv = "TULIP_MCP_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		srv := newTestServer(nil)
		// environ: the child's environment, one KEY=VALUE a line.
		srv.AddTool(&sdk.Tool{Name: "environ", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil
			})
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stdioServer is a Server whose Command runs this test binary as the test
// server.
func stdioServer(t testing.TB, name string) Server {
	exe, err := os.Executable()
	require.NoError(t, err)
	return Server{Name: name, Command: []string{exe}, Env: map[string]string{stdioServerEnv: "1"}}
}

type echoArgs struct {
	Text string `json:"text"`
	N    int64  `json:"n,omitempty"`
}

type echoOut struct {
	Echo string `json:"echo"`
	N    int64  `json:"n"`
}

// echo is the body both benchmark arms run: the MCP tool and the Go tool.
func echo(_ context.Context, a echoArgs) (echoOut, error) {
	return echoOut{Echo: a.Text, N: a.N + 1}, nil
}

// newTestServer is an in-process server with an "echo" tool (structured
// output) and a "pid" tool (the serving process's id); opts may be nil.
func newTestServer(opts *sdk.ServerOptions) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "tulip-test", Version: "1"}, opts)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echo the text.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, echoOut, error) {
			out, err := echo(ctx, a)
			return nil, out, err
		})
	srv.AddTool(&sdk.Tool{Name: "pid", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			b, _ := json.Marshal(os.Getpid())
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
		})
	return srv
}

// memServer serves srv in process: Transport connects a new server
// session each time; closeAll closes the server side of every session.
type memServer struct {
	srv      *sdk.Server
	mu       sync.Mutex
	sessions []*sdk.ServerSession
	lists    atomic.Int64 // tools/list requests
	calls    atomic.Int64 // tools/call requests
}

func newMemServer(srv *sdk.Server) *memServer {
	m := &memServer{srv: srv}
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch method {
			case "tools/list":
				m.lists.Add(1)
			case "tools/call":
				m.calls.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	return m
}

func (m *memServer) transport() (sdk.Transport, error) {
	ct, st := sdk.NewInMemoryTransports()
	ss, err := m.srv.Connect(context.Background(), st, nil)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.sessions = append(m.sessions, ss)
	m.mu.Unlock()
	return ct, nil
}

func (m *memServer) closeAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		_ = s.Close()
	}
	m.sessions = nil
}

// server is a Server config for m.
func (m *memServer) server(name string) Server {
	return Server{Name: name, Transport: m.transport}
}

// newToolset makes a toolset closed at the end of the test.
func newToolset(t testing.TB, s Server, opts Options) *Toolset {
	t.Helper()
	ts, err := New(s, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ts.Close() })
	return ts
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// appErr is err's ApplicationError.
func appErr(t testing.TB, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "not an ApplicationError: %v", err)
	return ae
}

func connects(ts *Toolset) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.connects
}

func connected(ts *Toolset) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.sess != nil
}

func bptr(b bool) *bool { return &b }
