package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tulip-temporal/tulip"
)

// Keys tulip sets in the _meta of every tools/call request.
const (
	// MetaIdempotencyKey carries the call's downstream idempotency key: the
	// same on every attempt, after a worker crash, on replay and after a
	// thread reload. A server that honours it performs a side effect once
	// per key.
	MetaIdempotencyKey = "io.tulip/idempotency-key"
	// MetaCallID carries the model's id of the call.
	MetaCallID = "io.tulip/call-id"
)

// protocolWithTTL is the first MCP version whose list results carry ttlMs.
const protocolWithTTL = "2026-07-28"

// Toolset is one MCP server's tools as a tulip.Toolset. Make one with
// New (or Open, for several); it connects on first use. Safe for
// concurrent use.
type Toolset struct {
	srv    Server
	opts   Options
	client *sdk.Client
	red    redactor

	mu       sync.Mutex
	sess     *sdk.ClientSession
	cmd      *exec.Cmd     // the stdio child of sess, if any
	dialing  chan struct{} // closed when the connection in progress is done
	closed   bool
	connects int      // connections made so far
	listing  *listing // nil: list again
	listGen  int      // bumped by Refresh: a listing begun before is not kept

	listing1 chan struct{} // one listing at a time
}

// listing is a tool list and when it goes stale.
type listing struct {
	tools   []ToolInfo
	expires time.Time
}

// ToolInfo is one listed tool: what the server says of it and what tulip
// does with it.
type ToolInfo struct {
	// Server is the toolset's name.
	Server string `json:"server"`
	// MCPName is the tool's name on the server (Spec.Name is the tulip name,
	// prefixed when Server.Prefix is set).
	MCPName string `json:"mcp_name"`
	// Annotations are the tool's annotations as listed; nil: none.
	Annotations *sdk.ToolAnnotations `json:"annotations,omitempty"`
	// Behaviour is what tulip does with the tool, already in Spec.
	Behaviour Behaviour `json:"behaviour"`
	// Spec is the tool as tulip uses it.
	Spec tulip.ToolSpec `json:"spec"`
}

// New makes the toolset of server s. It validates s and does not connect:
// the first Tools or Call does.
func New(s Server, opts Options) (*Toolset, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	t := &Toolset{srv: s, opts: opts, red: s.redactor(), listing1: make(chan struct{}, 1)}
	t.client = sdk.NewClient(&sdk.Implementation{Name: "tulip-temporal", Version: "1"}, &sdk.ClientOptions{
		// No roots: a server like server-filesystem would take the client's
		// (empty) roots over the directories it was started with.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			t.Refresh()
		},
	})
	return t, nil
}

// Name is the server's name.
func (t *Toolset) Name() string { return t.srv.Name }

// Tools lists the server's tools as tulip uses them (every page of the
// list), from the cached list while it is fresh: for the server's ttlMs
// when it gives one, else Options.ListTTL. A run records the list it uses
// in its history: the cache decides only what a new run sees.
func (t *Toolset) Tools(ctx context.Context) ([]tulip.ToolSpec, error) {
	infos, err := t.Describe(ctx)
	if err != nil {
		return nil, err
	}
	specs := make([]tulip.ToolSpec, len(infos))
	for i, in := range infos {
		specs[i] = in.Spec
	}
	return specs, nil
}

// Describe is Tools with what the server says of each tool.
func (t *Toolset) Describe(ctx context.Context) ([]ToolInfo, error) {
	select {
	case t.listing1 <- struct{}{}:
		defer func() { <-t.listing1 }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t.mu.Lock()
	l, gen := t.listing, t.listGen
	t.mu.Unlock()
	if l != nil && time.Now().Before(l.expires) {
		return clone(l.tools), nil
	}
	l, err := t.list(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if gen == t.listGen {
		t.listing = l
	}
	t.mu.Unlock()
	return clone(l.tools), nil
}

func clone(in []ToolInfo) []ToolInfo {
	out := make([]ToolInfo, len(in))
	copy(out, in)
	return out
}

// Refresh drops the cached list: the next Tools lists again. (A server on
// protocol 2026-07-28 or later may still be answered from the SDK's own
// cache, for the server's ttlMs.) A tools/list_changed notification
// refreshes too.
func (t *Toolset) Refresh() {
	t.mu.Lock()
	t.listing = nil
	t.listGen++
	t.mu.Unlock()
}

// list lists every page, once more on a new connection if the first
// breaks (listing has no side effect).
func (t *Toolset) list(ctx context.Context) (*listing, error) {
	for attempt := 0; ; attempt++ {
		s, err := t.session(ctx)
		if err != nil {
			return nil, err
		}
		tools, ttl, err := t.listPages(ctx, s)
		if err == nil {
			return t.decide(tools, ttl)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !isProtocolError(err) {
			t.drop(s)
			if attempt == 0 {
				continue
			}
		}
		return nil, &ConnectError{Server: t.srv.Name, Reason: "listing tools: " + t.red.text(err.Error())}
	}
}

func (t *Toolset) listPages(ctx context.Context, s *sdk.ClientSession) ([]*sdk.Tool, time.Duration, error) {
	var tools []*sdk.Tool
	params := &sdk.ListToolsParams{}
	minTTL := -1
	seen := map[string]bool{}
	for {
		res, err := s.ListTools(ctx, params)
		if err != nil {
			return nil, 0, err
		}
		tools = append(tools, res.Tools...)
		if minTTL < 0 || res.TTLMs < minTTL {
			minTTL = res.TTLMs
		}
		if res.NextCursor == "" {
			break
		}
		if seen[res.NextCursor] {
			return nil, 0, fmt.Errorf("the server repeats cursor %q", res.NextCursor)
		}
		seen[res.NextCursor] = true
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	ttl := t.opts.listTTL()
	if ir := s.InitializeResult(); ir != nil && ir.ProtocolVersion >= protocolWithTTL {
		// The spec: results carry ttlMs; 0 (or absent) is stale at once.
		ttl = time.Duration(max(minTTL, 0)) * time.Millisecond
	}
	return tools, ttl, nil
}

// decide maps the listed tools to tulip's.
func (t *Toolset) decide(tools []*sdk.Tool, ttl time.Duration) (*listing, error) {
	out := make([]ToolInfo, 0, len(tools))
	seen := map[string]bool{}
	listed := make(map[string]bool, len(tools)) // by MCP name
	for _, tool := range tools {
		listed[tool.Name] = true
	}
	for _, tool := range tools {
		name := t.srv.ToolName(tool.Name)
		if !nameRE.MatchString(name) {
			return nil, &ToolNameError{Server: t.srv.Name, Tool: t.red.text(tool.Name), Name: t.red.text(name)}
		}
		if seen[name] {
			return nil, &ConnectError{Server: t.srv.Name, Reason: fmt.Sprintf("the server lists tool %q twice", name)}
		}
		seen[name] = true
		b := t.srv.Decide(tool.Name, tool.Annotations)
		if b.Check != "" && !listed[b.Check] {
			return nil, &ConfigError{Server: t.srv.Name, Field: "Checks", Reason: fmt.Sprintf("names %q as the check of tool %q, and the server lists no such tool", b.Check, tool.Name)}
		}
		spec := tulip.ToolSpec{
			Name:        name,
			Description: t.red.text(tool.Description),
			Idempotent:  b.Idempotent,
			Approval:    b.Approval,
			OnUnknown:   b.OnUnknown,
			Toolset:     t.srv.Name,
		}
		if tool.InputSchema != nil {
			p, err := json.Marshal(tool.InputSchema)
			if err != nil {
				return nil, &ConnectError{Server: t.srv.Name, Reason: fmt.Sprintf("tool %q: input schema: %v", name, err)}
			}
			spec.Parameters = t.red.json(p)
		}
		var ann *sdk.ToolAnnotations
		if tool.Annotations != nil {
			a := *tool.Annotations
			a.Title = t.red.text(a.Title)
			ann = &a
		}
		out = append(out, ToolInfo{Server: t.srv.Name, MCPName: tool.Name, Annotations: ann, Behaviour: b, Spec: spec})
	}
	for tool := range t.srv.Checks {
		if !listed[tool] {
			return nil, &ConfigError{Server: t.srv.Name, Field: "Checks", Reason: fmt.Sprintf("names tool %q, which the server does not list", tool)}
		}
	}
	return &listing{tools: out, expires: time.Now().Add(ttl)}, nil
}

// Call runs the tool in.Tool (its prefix stripped) with in.Arguments, and
// in.IdempotencyKey and in.CallID in the request's _meta. Its result is the
// tool's structuredContent when it has one, else its content blocks as a
// JSON array. Errors are temporal.ApplicationErrors: ErrToolError (isError),
// ErrProtocolError (a JSON-RPC error), ErrTransport (the request was not
// sent, or was turned away unhandled; retryable), tulip.Ambiguous (the connection broke after
// the request was sent: it may have run; retryable unless the tool holds
// or checks), ErrUnknownTool and tulip.ArgumentDecode.
func (t *Toolset) Call(ctx context.Context, in tulip.ToolInput) (tulip.ToolOutput, error) {
	name, args, err := t.input(in)
	if err != nil {
		return tulip.ToolOutput{}, err
	}
	meta := sdk.Meta{MetaCallID: in.CallID}
	if in.IdempotencyKey != "" {
		meta[MetaIdempotencyKey] = in.IdempotencyKey
	}
	res, err := t.call(ctx, name, args, meta, tulip.Ambiguous)
	if err != nil {
		return tulip.ToolOutput{}, err
	}
	return t.result(in.Tool, res)
}

// input is in's MCP tool name and arguments.
func (t *Toolset) input(in tulip.ToolInput) (string, json.RawMessage, error) {
	name, ok := t.mcpName(in.Tool)
	if !ok {
		return "", nil, tulip.ToolError(
			fmt.Sprintf("mcp: server %q has no tool %q (its tools are prefixed %q)", t.srv.Name, in.Tool, t.srv.Name+"_"), ErrUnknownTool, true)
	}
	args, err := objectArgs(in.Arguments)
	if err != nil {
		return "", nil, tulip.ToolError(
			fmt.Sprintf("tool %s: arguments do not decode: %v", in.Tool, err), tulip.ArgumentDecode, true)
	}
	return name, args, nil
}

// call sends tools/call of the MCP tool name with args and meta, on the
// connection: once more on a new one when the first was found closed
// before the request went out. Its errors are ErrProtocolError,
// ErrTransport (not sent) and, when the connection broke after the
// request was sent, one of kind broken (retryable), or ctx's.
func (t *Toolset) call(ctx context.Context, name string, args json.RawMessage, meta sdk.Meta, broken tulip.ErrorKind) (*sdk.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		s, err := t.session(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, tulip.ToolError(err.Error(), ErrTransport, false)
		}
		sent := &sendTrace{}
		res, err := s.CallTool(sent.context(ctx), &sdk.CallToolParams{Name: name, Arguments: args, Meta: meta})
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		msg := fmt.Sprintf("mcp: server %q: tool %q: %s", t.srv.Name, name, t.red.text(oneLine(err.Error())))
		if isProtocolError(err) {
			return nil, tulip.ToolError(msg, ErrProtocolError, true)
		}
		t.drop(s)
		if t.notSent(err, sent) {
			if attempt == 0 && (errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing)) {
				// The session was closed already (or the server has
				// forgotten it): once more, on a new connection.
				continue
			}
			return nil, tulip.ToolError(msg, ErrTransport, false)
		}
		return nil, tulip.ToolError(msg+" (the connection broke after the request was sent: the call may have run)", broken, false)
	}
}

// notSent says a failed call never reached the server's tool. Over HTTP
// the request itself says: it was never written (no connection, a
// connection found closed), or the server refused it unhandled (404 for a
// session it has forgotten, 429, 503). Over stdio or a transport of your
// own, the SDK's ErrConnectionClosed, which it reports for a connection
// found closed before the request was written. Anything else (the
// connection broke while the request was written or awaited, a 502 or 504
// from a proxy) may have reached it.
func (t *Toolset) notSent(err error, sent *sendTrace) bool {
	if t.srv.URL != "" {
		return !sent.wrote.Load() || sent.refused.Load()
	}
	return errors.Is(err, sdk.ErrConnectionClosed)
}

// sendTrace follows one call's HTTP request: whether it was written
// whole, and whether the server refused it unhandled.
type sendTrace struct {
	wrote, refused atomic.Bool
}

type sendTraceKey struct{}

// context is ctx carrying s to the call's request (the SDK sends it with
// the call's context).
func (s *sendTrace) context(ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, sendTraceKey{}, s)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err == nil {
			s.wrote.Store(true)
		}
	}})
}

// refusedUnhandled: statuses with which a server turns a request away
// without handling it.
func refusedUnhandled(status int) bool {
	return status == http.StatusNotFound || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// Check asks the server's check tool for in.Tool (Server.Checks) whether
// the call in, whose outcome is unknown, was applied. The check tool is
// called with {"idempotency_key": KEY, "tool": MCP_NAME, "arguments":
// ARGS} (and the call id in _meta; not the key, which is the call's) and answers, in
// its structured content or a text block holding the JSON, {"applied":
// true, "result": R} (R is the call's result) or {"applied": false}. An
// isError answer, or one of another form, fails the check (ErrToolError,
// ErrCheckAnswer); a transport failure is retryable (a check is a read).
func (t *Toolset) Check(ctx context.Context, in tulip.ToolInput) (json.RawMessage, bool, error) {
	name, args, err := t.input(in)
	if err != nil {
		return nil, false, err
	}
	check := t.srv.Checks[name]
	if check == "" {
		return nil, false, tulip.ToolError(fmt.Sprintf("mcp: server %q: tool %q has no check (Server.Checks)", t.srv.Name, name), ErrUnknownTool, true)
	}
	q, err := json.Marshal(checkQuestion{Key: in.IdempotencyKey, Tool: name, Arguments: args})
	if err != nil {
		return nil, false, tulip.ToolError(fmt.Sprintf("tool %s: check question: %v", in.Tool, err), tulip.ArgumentDecode, true)
	}
	// The key is in the question, not in _meta: a server that remembers
	// answers by key must not take the check for the call. A check is a
	// read: one whose answer was lost is a transport error, asked again.
	res, err := t.call(ctx, check, q, sdk.Meta{MetaCallID: in.CallID}, ErrTransport)
	if err != nil {
		return nil, false, err
	}
	out, err := t.result(check, res)
	if err != nil {
		return nil, false, err
	}
	var a checkAnswer
	if err := json.Unmarshal(answerJSON(out.Result), &a); err != nil || a.Applied == nil {
		return nil, false, tulip.ToolError(fmt.Sprintf(`mcp: server %q: check %q of tool %q: the answer is not {"applied": true|false, "result": ...}: %.200s`,
			t.srv.Name, check, name, out.Result), ErrCheckAnswer, true)
	}
	if !*a.Applied {
		return nil, false, nil
	}
	if len(a.Result) == 0 {
		a.Result = json.RawMessage("null")
	}
	return a.Result, true, nil
}

// checkQuestion is what a check tool is called with.
type checkQuestion struct {
	Key       string          `json:"idempotency_key"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// checkAnswer is what a check tool answers.
type checkAnswer struct {
	Applied *bool           `json:"applied"`
	Result  json.RawMessage `json:"result"`
}

// answerJSON is a check tool's answer as a JSON object: its structured
// content, or (a result of content blocks) its one text block's JSON.
func answerJSON(result json.RawMessage) []byte {
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(result, &blocks) == nil && len(blocks) == 1 && blocks[0].Type == "text" {
		return []byte(blocks[0].Text)
	}
	return result
}

// mcpName strips the prefix from a tulip tool name.
func (t *Toolset) mcpName(tool string) (string, bool) {
	if !t.srv.Prefix {
		return tool, true
	}
	return strings.CutPrefix(tool, t.srv.Name+"_")
}

// objectArgs checks that text is one JSON object and returns it as is, so
// that numbers reach the server exactly as the model wrote them.
func objectArgs(text string) (json.RawMessage, error) {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage(`{}`), nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the object")
	}
	return json.RawMessage(text), nil
}

// result maps a tools/call result.
func (t *Toolset) result(tool string, res *sdk.CallToolResult) (tulip.ToolOutput, error) {
	content := res.Content
	if content == nil {
		content = []sdk.Content{}
	}
	if res.IsError {
		var texts []string
		for _, c := range content {
			if tc, ok := c.(*sdk.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		msg := strings.Join(texts, "\n")
		if msg == "" {
			b, _ := json.Marshal(content)
			msg = fmt.Sprintf("tool %s failed: %s", tool, b)
		}
		return tulip.ToolOutput{}, tulip.ToolError(t.red.text(msg), ErrToolError, true)
	}
	var (
		b   []byte
		err error
	)
	if res.StructuredContent != nil {
		if b = exactStructured(res.StructuredContent, content); b == nil {
			b, err = json.Marshal(res.StructuredContent)
		}
	} else {
		b, err = json.Marshal(content)
	}
	if err != nil {
		return tulip.ToolOutput{}, tulip.ToolError(
			fmt.Sprintf("tool %s: result does not encode as JSON: %v", tool, err), tulip.ResultEncode, true)
	}
	return tulip.ToolOutput{Result: t.red.json(b)}, nil
}

// isProtocolError: the server answered with a JSON-RPC error (as opposed
// to the connection failing, which the SDK also reports with codes).
func isProtocolError(err error) bool {
	var w *jsonrpc.Error
	if !errors.As(err, &w) || errors.Is(err, sdk.ErrConnectionClosed) {
		return false
	}
	switch w.Code {
	case -32003, -32004, -32005: // client closing, server closing, rejected by transport
		return false
	}
	return true
}

// session returns the connection, making it if there is none. One
// connection is made at a time; concurrent callers wait for it.
func (t *Toolset) session(ctx context.Context) (*sdk.ClientSession, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, &ClosedError{Server: t.srv.Name}
		}
		if t.sess != nil {
			s := t.sess
			t.mu.Unlock()
			return s, nil
		}
		if ch := t.dialing; ch != nil {
			t.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		t.dialing = ch
		t.mu.Unlock()

		s, cmd, err := t.dial(ctx)

		t.mu.Lock()
		t.dialing = nil
		close(ch)
		closed := t.closed
		if err == nil && !closed {
			t.sess, t.cmd = s, cmd
			t.connects++
			go t.watch(s)
		}
		t.mu.Unlock()
		if err == nil && closed {
			_ = s.Close()
			return nil, &ClosedError{Server: t.srv.Name}
		}
		return s, err
	}
}

// dial connects, within Options.ConnectTimeout and ctx.
func (t *Toolset) dial(ctx context.Context) (*sdk.ClientSession, *exec.Cmd, error) {
	// The connection outlives ctx (and keeps none of its values): only the
	// handshake is bounded by it.
	dctx, cancel := context.WithTimeout(context.Background(), t.opts.connectTimeout())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	var (
		tr  sdk.Transport
		cmd *exec.Cmd
		err error
	)
	switch {
	case t.srv.Transport != nil:
		tr, err = t.srv.Transport()
	case len(t.srv.Command) > 0:
		cmd = exec.Command(t.srv.Command[0], t.srv.Command[1:]...)
		cmd.Env = stdioEnv(t.srv.Env)
		cmd.Stderr = t.opts.Stderr
		tr = &sdk.CommandTransport{Command: cmd, TerminateDuration: t.opts.CloseTimeout}
	default:
		hc := &http.Client{Transport: headerTransport{headers: t.srv.Headers, base: http.DefaultTransport}}
		tr = &sdk.StreamableClientTransport{Endpoint: t.srv.URL, HTTPClient: hc}
	}
	if err != nil {
		return nil, nil, &ConnectError{Server: t.srv.Name, Reason: "transport: " + t.red.text(oneLine(err.Error()))}
	}
	s, err := t.client.Connect(dctx, tr, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if dctx.Err() != nil {
			err = fmt.Errorf("no answer within %s", t.opts.connectTimeout())
		}
		if cmd != nil && cmd.Process != nil {
			// A handshake that failed leaves no child behind (the SDK
			// stops it on most paths; Kill of a finished one is a no-op).
			_ = cmd.Process.Kill()
		}
		return nil, nil, &ConnectError{Server: t.srv.Name, Reason: "cannot connect: " + t.red.text(oneLine(err.Error()))}
	}
	return s, cmd, nil
}

// watch drops s when its connection ends (the server closed it, or the
// stdio child died): the next call connects again.
func (t *Toolset) watch(s *sdk.ClientSession) {
	_ = s.Wait()
	t.drop(s)
}

// drop forgets s if it is the current connection, and closes it (a stdio
// child is stopped).
func (t *Toolset) drop(s *sdk.ClientSession) {
	t.mu.Lock()
	if t.sess == s {
		t.sess, t.cmd = nil, nil
	}
	t.mu.Unlock()
	_ = s.Close()
}

// Close closes the connection and stops a stdio server. The toolset is not
// usable after.
func (t *Toolset) Close() error {
	t.mu.Lock()
	t.closed = true
	s := t.sess
	t.sess, t.cmd = nil, nil
	t.mu.Unlock()
	if s == nil {
		return nil
	}
	err := s.Close()
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) {
		return nil // a child that exits non-zero on closed stdin is stopped all the same
	}
	return &ConnectError{Server: t.srv.Name, Reason: "closing: " + t.red.text(oneLine(err.Error()))}
}

// defaultEnv names the worker's variables a stdio server inherits: those
// the MCP TypeScript SDK's getDefaultEnvironment passes, and the locale,
// the time zone and the temporary directory. No other: the worker's
// environment holds its own secrets (OPENAI_API_KEY, ...).
func defaultEnv() []string {
	if runtime.GOOS == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "PROGRAMFILES"}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"}
}

// stdioEnv is a stdio server's environment: the worker's defaultEnv
// variables that are set, then env (which wins).
func stdioEnv(env map[string]string) []string {
	var out []string
	for _, k := range defaultEnv() {
		if _, set := env[k]; set {
			continue
		}
		// A value starting with "()" is a shell function, which the
		// TypeScript SDK skips too.
		if v, ok := os.LookupEnv(k); ok && !strings.HasPrefix(v, "()") {
			out = append(out, k+"="+v)
		}
	}
	keys := slices.Sorted(maps.Keys(env))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// headerTransport adds headers to every request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := h.base.RoundTrip(req)
	if s, ok := req.Context().Value(sendTraceKey{}).(*sendTrace); ok && err == nil && req.Method == http.MethodPost && refusedUnhandled(resp.StatusCode) {
		s.refused.Store(true)
	}
	return resp, err
}

// redactor replaces secret values by "[redacted]".
type redactor struct {
	secrets []string
	r       *strings.Replacer
}

// minSecret is the shortest value redacted: shorter ones (DEBUG=1) would
// mangle unrelated text, and are no secret anyway.
const minSecret = 8

const redacted = "[redacted]"

// newRedactor replaces values of minSecret bytes or more by "[redacted]",
// and before them the old strings of whole (old, new pairs) by their new,
// whatever their length.
func newRedactor(values []string, whole ...string) redactor {
	var rd redactor
	var pairs []string
	for i := 0; i+1 < len(whole); i += 2 {
		if whole[i] == "" {
			continue
		}
		rd.secrets = append(rd.secrets, whole[i])
		pairs = append(pairs, whole[i], whole[i+1])
	}
	for _, v := range values {
		if len(v) < minSecret {
			continue
		}
		rd.secrets = append(rd.secrets, v)
		pairs = append(pairs, v, redacted)
	}
	if len(pairs) > 0 {
		rd.r = strings.NewReplacer(pairs...)
	}
	return rd
}

func (rd redactor) text(s string) string {
	if rd.r == nil {
		return s
	}
	return rd.r.Replace(s)
}

// json redacts the strings (and keys) of a JSON value, keeping it valid
// JSON. A value without secrets is returned as is.
func (rd redactor) json(b []byte) []byte {
	if rd.r == nil {
		return b
	}
	found := false
	for _, s := range rd.secrets {
		if bytes.Contains(b, []byte(s)) || bytes.Contains(b, jsonEscaped(s)) {
			found = true
			break
		}
	}
	if !found {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []byte(`"` + redacted + `"`)
	}
	out, err := json.Marshal(rd.walk(v))
	if err != nil {
		return []byte(`"` + redacted + `"`)
	}
	return out
}

func (rd redactor) walk(v any) any {
	switch x := v.(type) {
	case string:
		return rd.text(x)
	case []any:
		for i := range x {
			x[i] = rd.walk(x[i])
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[rd.text(k)] = rd.walk(e)
		}
		return m
	}
	return v
}

func jsonEscaped(s string) []byte {
	b, _ := json.Marshal(s)
	return b[1 : len(b)-1]
}

// exactStructured is structured's JSON as the server wrote it, from the
// text block that serializes it (the spec asks tools returning structured
// content to send it as text too): the SDK decodes structuredContent
// through float64, which would change numbers like 12345678901234567890.
// Nil when no text block holds the same value.
func exactStructured(structured any, content []sdk.Content) []byte {
	for _, c := range content {
		tc, ok := c.(*sdk.TextContent)
		if !ok {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(tc.Text))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			continue
		}
		if _, err := dec.Token(); err != io.EOF {
			continue
		}
		if !sameValue(v, structured) {
			continue
		}
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(tc.Text)) != nil {
			continue
		}
		return buf.Bytes()
	}
	return nil
}

// sameValue: exact (decoded with UseNumber) is lossy (decoded through
// float64), numbers compared as float64.
func sameValue(exact, lossy any) bool {
	switch e := exact.(type) {
	case nil:
		return lossy == nil
	case bool:
		l, ok := lossy.(bool)
		return ok && e == l
	case string:
		l, ok := lossy.(string)
		return ok && e == l
	case json.Number:
		ef, err := e.Float64()
		if err != nil {
			return false
		}
		switch l := lossy.(type) {
		case float64:
			return ef == l
		case json.Number:
			lf, err := l.Float64()
			return err == nil && ef == lf
		}
		return false
	case []any:
		l, ok := lossy.([]any)
		if !ok || len(l) != len(e) {
			return false
		}
		for i := range e {
			if !sameValue(e[i], l[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		l, ok := lossy.(map[string]any)
		if !ok || len(l) != len(e) {
			return false
		}
		for k, v := range e {
			lv, ok := l[k]
			if !ok || !sameValue(v, lv) {
				return false
			}
		}
		return true
	}
	return false
}
