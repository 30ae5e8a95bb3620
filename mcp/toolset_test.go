package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// annotatedServer lists tools with every kind of annotation.
func annotatedServer() *memServer {
	srv := sdk.NewServer(&sdk.Implementation{Name: "annotated", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	noop := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{}, nil
	}
	for _, tool := range []*sdk.Tool{
		{Name: "read", Description: "Read a file.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		{Name: "write", Description: "Write a file.", Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: bptr(true)}},
		{Name: "append", Description: "Append to a file.", Annotations: &sdk.ToolAnnotations{DestructiveHint: bptr(false)}},
		{Name: "mystery", Description: "No annotations."},
	} {
		tool.InputSchema = schema
		srv.AddTool(tool, noop)
	}
	return newMemServer(srv)
}

// Tools maps annotations, trust and overrides to ToolSpecs, end to end.
func TestToolsAnnotationsAndOverrides(t *testing.T) {
	type want struct{ idem, approval bool }
	cases := []struct {
		name string
		mod  func(*Server)
		want map[string]want
	}{
		{"untrusted", func(*Server) {}, map[string]want{
			"read": {}, "write": {}, "append": {}, "mystery": {}}},
		{"untrusted, approval", func(s *Server) { s.ApproveDestructive = true }, map[string]want{
			"read": {false, true}, "write": {false, true}, "append": {false, true}, "mystery": {false, true}}},
		{"trusted", func(s *Server) { s.Trust = true }, map[string]want{
			"read": {}, "write": {true, false}, "append": {}, "mystery": {}}},
		{"trusted, approval", func(s *Server) { s.Trust, s.ApproveDestructive = true, true }, map[string]want{
			"read": {}, "write": {true, true}, "append": {}, "mystery": {false, true}}},
		{"trusted, overrides", func(s *Server) {
			s.Trust, s.Idempotent, s.NotIdempotent = true, []string{"read", "mystery"}, []string{"write"}
		}, map[string]want{"read": {true, false}, "write": {}, "append": {}, "mystery": {true, false}}},
		{"untrusted, Idempotent override", func(s *Server) { s.Idempotent = []string{"append"} }, map[string]want{
			"read": {}, "write": {}, "append": {true, false}, "mystery": {}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := annotatedServer()
			s := m.server("files")
			c.mod(&s)
			ts := newToolset(t, s, Options{})
			specs, err := ts.Tools(ctxT(t))
			require.NoError(t, err)
			got := map[string]want{}
			for _, sp := range specs {
				got[sp.Name] = want{sp.Idempotent, sp.Approval}
				// An untrusted server's tool not served on repeat holds
				// if its worker is lost; every other retries.
				hold := !s.Trust && !sp.Idempotent
				assert.Equal(t, hold, sp.OnUnknown == "hold", "%s: on_unknown %q", sp.Name, sp.OnUnknown)
				assert.Equal(t, "files", sp.Toolset)
				assert.NotEmpty(t, sp.Description)
				assert.JSONEq(t, `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`, string(sp.Parameters))
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// A server with more tools than fit one page: every page is listed.
func TestToolsPaging(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "paged", Version: "1"}, &sdk.ServerOptions{PageSize: 2})
	for i := range 7 {
		srv.AddTool(&sdk.Tool{Name: fmt.Sprintf("tool_%d", i), InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
	m := newMemServer(srv)
	ts := newToolset(t, m.server("paged"), Options{})
	specs, err := ts.Tools(ctxT(t))
	require.NoError(t, err)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	assert.ElementsMatch(t, []string{"tool_0", "tool_1", "tool_2", "tool_3", "tool_4", "tool_5", "tool_6"}, names)
	assert.Equal(t, int64(4), m.lists.Load(), "7 tools in pages of 2")
}

// The list is cached for the server's ttlMs (protocol 2026-07-28), else
// for Options.ListTTL; Refresh drops it.
func TestToolsCache(t *testing.T) {
	t.Run("ttlMs 0 is stale at once", func(t *testing.T) {
		m := newMemServer(newTestServer(nil)) // the SDK's server sends ttlMs 0
		ts := newToolset(t, m.server("s"), Options{ListTTL: time.Hour})
		for range 3 {
			_, err := ts.Tools(ctxT(t))
			require.NoError(t, err)
		}
		assert.Equal(t, int64(3), m.lists.Load())
	})
	t.Run("ttlMs honoured", func(t *testing.T) {
		m := newMemServer(newTestServer(&sdk.ServerOptions{SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) {
			c.TTLMs = 60_000
		}}))
		ts := newToolset(t, m.server("s"), Options{ListTTL: -1})
		for range 3 {
			_, err := ts.Tools(ctxT(t))
			require.NoError(t, err)
		}
		assert.Equal(t, int64(1), m.lists.Load())
	})
	t.Run("older protocol: ListTTL, then Refresh", func(t *testing.T) {
		m := newMemServer(newTestServer(&sdk.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}}))
		ts := newToolset(t, m.server("s"), Options{})
		for range 3 {
			_, err := ts.Tools(ctxT(t))
			require.NoError(t, err)
		}
		assert.Equal(t, int64(1), m.lists.Load(), "kept for DefaultListTTL")
		ts.Refresh()
		_, err := ts.Tools(ctxT(t))
		require.NoError(t, err)
		assert.Equal(t, int64(2), m.lists.Load())
	})
	t.Run("older protocol: negative ListTTL lists every time", func(t *testing.T) {
		m := newMemServer(newTestServer(&sdk.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}}))
		ts := newToolset(t, m.server("s"), Options{ListTTL: -1})
		for range 2 {
			_, err := ts.Tools(ctxT(t))
			require.NoError(t, err)
		}
		assert.Equal(t, int64(2), m.lists.Load())
	})
}

// recordingServer has a tool "record" that keeps what the server saw.
type seen struct {
	mu   sync.Mutex
	meta []map[string]any
	args []string
}

func recordingServer(s *seen) *memServer {
	srv := sdk.NewServer(&sdk.Implementation{Name: "recording", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "record", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.mu.Lock()
			s.meta = append(s.meta, req.Params.Meta)
			s.args = append(s.args, string(req.Params.Arguments))
			s.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "recorded"}}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{
				&sdk.TextContent{Text: "disk full"}, &sdk.TextContent{Text: "try later"}}}, nil
		})
	return newMemServer(srv)
}

// The downstream key reaches the server in _meta, and the arguments reach
// it as the model wrote them (numbers exact).
func TestCallMetaAndArguments(t *testing.T) {
	var s seen
	m := recordingServer(&s)
	ts := newToolset(t, m.server("rec"), Options{})
	args := `{"amount": 9007199254740993, "price": 120.50, "note": "é"}`
	out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "record", CallID: "call-7", Arguments: args, IdempotencyKey: "tulip:run-1:3"})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"type":"text","text":"recorded"}]`, string(out.Result), "content blocks as wire JSON")
	require.Len(t, s.meta, 1)
	assert.Equal(t, "tulip:run-1:3", s.meta[0][MetaIdempotencyKey])
	assert.Equal(t, "call-7", s.meta[0][MetaCallID])
	assert.Contains(t, s.args[0], "9007199254740993")
	assert.Contains(t, s.args[0], "120.50")

	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "record", CallID: "c"})
	require.NoError(t, err, "empty arguments are {}")
	assert.Equal(t, "{}", s.args[1])
	assert.NotContains(t, s.meta[1], MetaIdempotencyKey, "no key outside tulip: none sent")
}

func TestCallResults(t *testing.T) {
	m := newMemServer(newTestServer(nil))
	ts := newToolset(t, m.server("t"), Options{})
	out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "echo", Arguments: `{"text":"hi","n":41}`})
	require.NoError(t, err)
	assert.JSONEq(t, `{"echo":"hi","n":42}`, string(out.Result), "structuredContent when present")

	// Numbers beyond float64 stay exact when a text block serializes the
	// structured content (as the spec asks); a text block that differs is
	// not taken for it.
	big := `{"id": 12345678901234567891, "price": 1.50, "tags": ["a", null, true]}`
	cases := []struct {
		name, text, want string
	}{
		{"serialized", big, `{"id":12345678901234567891,"price":1.50,"tags":["a",null,true]}`},
		{"differs", `{"id": 1}`, `{"id":12345678901234567000,"price":1.5,"tags":["a",null,true]}`},
		{"not JSON", `id 12345678901234567891`, `{"id":12345678901234567000,"price":1.5,"tags":["a",null,true]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := sdk.NewServer(&sdk.Implementation{Name: "big", Version: "1"}, nil)
			srv.AddTool(&sdk.Tool{Name: "big", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return &sdk.CallToolResult{StructuredContent: json.RawMessage(big), Content: []sdk.Content{&sdk.TextContent{Text: c.text}}}, nil
				})
			ts := newToolset(t, newMemServer(srv).server("big"), Options{})
			out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "big", Arguments: `{}`})
			require.NoError(t, err)
			assert.Equal(t, c.want, string(out.Result))
		})
	}
}

func TestCallErrors(t *testing.T) {
	var s seen
	m := recordingServer(&s)
	ts := newToolset(t, m.server("rec"), Options{})
	cases := []struct {
		name, tool, args string
		typ, msg         string
	}{
		{"isError", "fail", `{}`, string(ErrToolError), "disk full\ntry later"},
		{"unknown tool", "nope", `{}`, string(ErrProtocolError), `unknown tool "nope"`},
		{"arguments not an object", "record", `[1]`, protocol.ErrArgumentDecode, "not a JSON object"},
		{"arguments not JSON", "record", `{"a":`, protocol.ErrArgumentDecode, "do not decode"},
		{"trailing data", "record", `{} {}`, protocol.ErrArgumentDecode, "trailing data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: c.tool, Arguments: c.args})
			ae := appErr(t, err)
			assert.Equal(t, c.typ, ae.Type())
			assert.True(t, ae.NonRetryable())
			assert.Contains(t, ae.Message(), c.msg)
		})
	}
	assert.Empty(t, s.args, "no bad call reached the tool")
}

// Two servers offering one tool name: Open refuses on one line, unless a
// prefix separates them; prefixed calls reach the server's own name.
func TestOpenClashAndPrefix(t *testing.T) {
	a, b := newMemServer(newTestServer(nil)), newMemServer(newTestServer(nil))
	_, err := Open(ctxT(t), []Server{a.server("fs"), b.server("fs2")})
	var ce *ClashError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, `mcp: tool "echo" is offered by servers "fs" and "fs2": give one of them a prefix`, err.Error())

	_, err = Open(ctxT(t), []Server{a.server("fs")}, OpenOptions{GoTools: []string{"pid"}})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, `mcp: tool "pid" is offered by a Go tool and by server "fs": give server "fs" a prefix`, err.Error())

	s2 := b.server("fs2")
	s2.Prefix = true
	set, err := Open(ctxT(t), []Server{a.server("fs"), s2}, OpenOptions{GoTools: []string{"fs2_other"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = set.Close() })
	require.Len(t, set.Toolsets(), 2)
	specs, err := set.Toolset("fs2").Tools(ctxT(t))
	require.NoError(t, err)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	assert.ElementsMatch(t, []string{"fs2_echo", "fs2_pid"}, names)
	out, err := set.Toolset("fs2").Call(ctxT(t), tulip.ToolInput{Tool: "fs2_echo", Arguments: `{"text":"x"}`})
	require.NoError(t, err)
	assert.JSONEq(t, `{"echo":"x","n":1}`, string(out.Result))
	_, err = set.Toolset("fs2").Call(ctxT(t), tulip.ToolInput{Tool: "echo", Arguments: `{}`})
	assert.Equal(t, string(ErrUnknownTool), appErr(t, err).Type())
}

func TestOpenErrors(t *testing.T) {
	bad := sdk.NewServer(&sdk.Implementation{Name: "bad", Version: "1"}, nil)
	bad.AddTool(&sdk.Tool{Name: "has.dot", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	good := newMemServer(newTestServer(nil))
	withOverride := func(list string) Server {
		s := good.server("g")
		if list == "Idempotent" {
			s.Idempotent = []string{"ech0"}
		} else {
			s.NotIdempotent = []string{"ech0"}
		}
		return s
	}
	long := good.server(strings.Repeat("p", 60))
	long.Prefix = true // "pppp..._echo" is over 64 characters
	cases := []struct {
		name    string
		servers []Server
		target  any
		want    string
	}{
		{"invalid tool name", []Server{newMemServer(bad).server("bad")}, new(*ToolNameError),
			`mcp: server "bad" lists tool "has.dot", which is not a valid tulip tool name (1-64 letters, digits, '_' or '-')`},
		{"prefixed name too long", []Server{long}, new(*ToolNameError), `whose name "pppp`},
		{"duplicate server", []Server{good.server("g"), good.server("g")}, new(*DuplicateServerError), `mcp: two servers are named "g"`},
		{"Idempotent typo", []Server{withOverride("Idempotent")}, new(*OverrideError),
			`mcp: server "g": Idempotent names tool "ech0", which the server does not list`},
		{"NotIdempotent typo", []Server{withOverride("NotIdempotent")}, new(*OverrideError), `NotIdempotent names tool "ech0"`},
		{"invalid config", []Server{{Name: "x"}}, new(*ConfigError), `mcp: server "x": Command give Command`},
		{"unreachable", []Server{{Name: "gone", Command: []string{"/nonexistent/mcp-server"}}}, new(*ConnectError),
			`mcp: server "gone": cannot connect:`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, err := Open(ctxT(t), c.servers)
			require.Error(t, err)
			assert.Nil(t, set)
			assert.ErrorAs(t, err, c.target)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// Concurrent calls share one connection; after the server side closes it,
// the next call connects again and succeeds.
func TestReconnectInMemory(t *testing.T) {
	m := newMemServer(newTestServer(nil))
	ts := newToolset(t, m.server("t"), Options{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			_, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "echo", Arguments: fmt.Sprintf(`{"text":"%d"}`, i)})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, 1, connects(ts))

	m.closeAll()
	require.Eventually(t, func() bool { return !connected(ts) }, 5*time.Second, 5*time.Millisecond, "the broken session is dropped")
	out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "echo", Arguments: `{"text":"again"}`})
	require.NoError(t, err)
	assert.JSONEq(t, `{"echo":"again","n":1}`, string(out.Result))
	assert.Equal(t, 2, connects(ts))
}

// Even when the call races the drop (the session is closed but still
// current), the call goes out once on a new connection.
func TestCallOnClosedSession(t *testing.T) {
	m := newMemServer(newTestServer(nil))
	ts := newToolset(t, m.server("t"), Options{})
	_, err := ts.Tools(ctxT(t))
	require.NoError(t, err)
	ts.mu.Lock()
	s := ts.sess
	ts.mu.Unlock()
	require.NoError(t, s.Close()) // closed from our side: the watcher has not dropped it yet, or has
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "echo", Arguments: `{"text":"x"}`})
	require.NoError(t, err)
	assert.Equal(t, int64(1), m.calls.Load())
}

// A stdio server is a child process: killed, it is spawned again by the
// next call; Close stops it.
func TestReconnectStdio(t *testing.T) {
	ts := newToolset(t, stdioServer(t, "child"), Options{})
	pid := func() int {
		out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "pid", Arguments: `{}`})
		require.NoError(t, err)
		var blocks []struct{ Text string }
		require.NoError(t, json.Unmarshal(out.Result, &blocks))
		var p int
		require.NoError(t, json.Unmarshal([]byte(blocks[0].Text), &p))
		return p
	}
	first := pid()
	assert.NotEqual(t, os.Getpid(), first)
	ts.mu.Lock()
	cmd := ts.cmd
	ts.mu.Unlock()
	require.Equal(t, first, cmd.Process.Pid)
	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, func() bool { return !connected(ts) }, 5*time.Second, 5*time.Millisecond, "the dead child's session is dropped")
	second := pid()
	assert.NotEqual(t, first, second, "a new child")
	assert.Equal(t, 2, connects(ts))

	ts.mu.Lock()
	cmd = ts.cmd
	ts.mu.Unlock()
	require.NoError(t, ts.Close())
	assert.NotNil(t, cmd.ProcessState, "Close waited for the child to exit")
	_, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "pid", Arguments: `{}`})
	ae := appErr(t, err)
	assert.Equal(t, string(ErrTransport), ae.Type(), "retryable: another worker may take it")
	assert.Equal(t, `mcp: server "child": the toolset is closed`, ae.Message())
	_, err = ts.Tools(ctxT(t))
	assert.ErrorAs(t, err, new(*ClosedError))
}

// A connection that cannot be made is a retryable transport error, within
// ConnectTimeout.
func TestCallUnreachable(t *testing.T) {
	ts := newToolset(t, Server{Name: "hang", Transport: func() (sdk.Transport, error) {
		// A server that reads every request and never answers.
		inR, inW := io.Pipe()
		outR, _ := io.Pipe()
		go func() { _, _ = io.Copy(io.Discard, inR) }()
		return &sdk.IOTransport{Reader: outR, Writer: inW}, nil
	}}, Options{ConnectTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "x"})
	ae := appErr(t, err)
	assert.Equal(t, string(ErrTransport), ae.Type())
	assert.False(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), "no answer within 200ms")
	assert.Less(t, time.Since(start), 5*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ts2 := newToolset(t, Server{Name: "hang", Transport: ts.srv.Transport}, Options{})
	_, err = ts2.Tools(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's context bounds connecting")
}

// Over Streamable HTTP the headers reach the server, and their values
// never come back in a result, a spec or an error.
func TestHTTPHeadersAreSecret(t *testing.T) {
	const token = "s3cr3t-token-value"
	srv := sdk.NewServer(&sdk.Implementation{Name: "http", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "whoami", Description: "Says who you are (" + token + ").",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string","default":"` + token + `"}}}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			auth := req.Extra.Header.Get("Authorization")
			return &sdk.CallToolResult{StructuredContent: map[string]any{"auth": auth, "n": json.Number("12345678901234567890")},
				Content: []sdk.Content{&sdk.TextContent{Text: auth}}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "leak", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "bad key " + token}}}, nil
		})
	var gotAuth string
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			gotAuth = a
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // after the toolset's Close: its event stream holds a request open

	ts := newToolset(t, Server{Name: "web", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer " + token}}, Options{})
	specs, err := ts.Tools(ctxT(t))
	require.NoError(t, err)
	b, _ := json.Marshal(specs)
	assert.NotContains(t, string(b), token)
	assert.Contains(t, string(b), redacted)
	out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "whoami", Arguments: `{}`})
	require.NoError(t, err)
	assert.Equal(t, "Bearer "+token, gotAuth)
	assert.NotContains(t, string(out.Result), token)
	assert.JSONEq(t, `{"auth":"[redacted]","n":12345678901234567000}`, string(out.Result),
		"no text block serializes the structured content: its numbers went through float64")
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "leak", Arguments: `{}`})
	assert.Equal(t, string(ErrToolError), appErr(t, err).Type())
	assert.Equal(t, "bad key [redacted]", appErr(t, err).Message())

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	ts2 := newToolset(t, Server{Name: "web", URL: gone.URL + "/mcp", Headers: map[string]string{"X-Api-Key": token}}, Options{})
	_, err = ts2.Tools(ctxT(t))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), token)
	assert.NotContains(t, err.Error(), "\n")
}

func TestRedactor(t *testing.T) {
	rd := newRedactor([]string{"1", "long-secret-\"q\"", "another-secret"})
	assert.Equal(t, "x=1", rd.text("x=1"), "short values are not redacted")
	assert.Equal(t, "a [redacted] b", rd.text(`a long-secret-"q" b`))
	assert.JSONEq(t, `{"k":"[redacted]","[redacted]":1}`, string(rd.json([]byte(`{"k":"long-secret-\"q\"","another-secret":1}`))))
	in := []byte(`{"n": 1.50}`)
	assert.Equal(t, in, rd.json(in), "untouched when no secret is in it")
}

// A URL's userinfo and query values are secrets: the redacted form keeps
// the scheme, host, path and query keys; every spelling of the URL an
// error may hold is replaced whole, and its secret values alone too.
func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:pass@mcp.example.com/v1/mcp?token=t0k&api_key=k3y#frag": "https://***@mcp.example.com/v1/mcp?token=***&api_key=***",
		"https://mcp.example.com/mcp":                                         "https://mcp.example.com/mcp",
		"http://apikey-only@127.0.0.1:8080/mcp?key":                           "http://***@127.0.0.1:8080/mcp?key=***",
		"http://h/mcp?key=a%2Fb":                                              "http://h/mcp?key=***",
		"%zz":                                                                 "***",
	} {
		assert.Equal(t, want, RedactURL(raw), raw)
	}

	raw := "http://user-longname:pass-longword@127.0.0.1:1/mcp?token=short&key=a%2Fvery-long-value"
	rd := Server{Name: "w", URL: raw}.redactor()
	red := "http://***@127.0.0.1:1/mcp?token=***&key=***"
	for _, form := range []string{
		raw,
		"http://user-longname:***@127.0.0.1:1/mcp?token=short&key=a%2Fvery-long-value",   // net/http's errors
		"http://user-longname:xxxxx@127.0.0.1:1/mcp?token=short&key=a%2Fvery-long-value", // url.URL.Redacted
	} {
		assert.Equal(t, `Post "`+red+`": refused`, rd.text(`Post "`+form+`": refused`))
	}
	assert.Equal(t, "who: [redacted], key: [redacted] [redacted]", rd.text("who: user-longname, key: a/very-long-value a%2Fvery-long-value"))
	assert.JSONEq(t, `{"u":"`+red+`","p":"[redacted]"}`, string(rd.json([]byte(`{"u":"`+raw+`","p":"pass-longword"}`))))
}
