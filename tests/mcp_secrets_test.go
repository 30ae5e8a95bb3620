package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/temporalproto"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/mcp"
	"github.com/tulip-temporal/tulip/openai"
	tworker "github.com/tulip-temporal/tulip/worker"
	"github.com/tulip-temporal/tulip/workflow"
)

// The secrets of an MCP server's URL: userinfo and query values.
const (
	urlUser  = "tulip-url-user-5521"
	urlPass  = "tulip-url-pass-8830"
	urlToken = "tulip-query-token-4417"
	urlKey   = "tulip-query-apikey-2290"
)

var urlSecrets = []string{urlUser, urlPass, urlToken, urlKey}

// mcpHTTPServer is a Go SDK MCP server over Streamable HTTP on loopback
// that answers only a request carrying the URL's credentials (basic auth
// from the userinfo, and the query's token and api_key). Its tool lookup
// answers "found Q".
type mcpHTTPServer struct {
	url        string // with the credentials
	hs         *http.Server
	authorized atomic.Int64 // requests that carried the credentials
}

func newMCPHTTPServer(t *testing.T) *mcpHTTPServer {
	srv := sdk.NewServer(&sdk.Implementation{Name: "lookup", Version: "1"}, nil)
	type args struct {
		Q string `json:"q"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "lookup", Description: "Looks things up."},
		func(_ context.Context, _ *sdk.CallToolRequest, a args) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found " + a.Q}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	m := &mcpHTTPServer{}
	m.hs = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		q := r.URL.Query()
		if !ok || u != urlUser || p != urlPass || q.Get("token") != urlToken || q.Get("api_key") != urlKey {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		m.authorized.Add(1)
		h.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = m.hs.Serve(ln) }()
	t.Cleanup(func() { _ = m.hs.Close() })
	m.url = fmt.Sprintf("http://%s:%s@%s/mcp?token=%s&api_key=%s", urlUser, urlPass, ln.Addr(), urlToken, urlKey)
	return m
}

// down takes the server away (connections too): the next request cannot
// connect.
func (m *mcpHTTPServer) down() { _ = m.hs.Close() }

// noURLSecret asserts that text holds no secret of the URL.
func noURLSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range urlSecrets {
		assert.NotContains(t, text, s, what)
	}
}

// An HTTP MCP server reached through a URL with userinfo and query
// tokens: the real URL connects (the server checks the credentials), and
// none of its secrets enters the run's history (the whole history's JSON
// and every decoded payload), although a call failed on the unreachable
// server with an error that names the URL.
func TestMCPURLSecretsNeverEnterHistory(t *testing.T) {
	web := newMCPHTTPServer(t)
	f := newFakeOpenAI(t,
		toolCalls([3]string{"l1", "lookup", `{"q": "ord-4821"}`}),
		before(web.down, toolCalls([3]string{"l2", "lookup", `{"q": "ord-4822"}`})),
		answer("done"),
	)
	set, err := mcp.Open(context.Background(), []mcp.Server{{Name: "web", URL: web.url}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = set.Close() })
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	m, err := openai.New(openai.Options{BaseURL: f.URL + "/v1", Model: "gpt-test"})
	require.NoError(t, err)
	startWorker(t, c, tq, tworker.Options{Toolsets: set.Toolsets(), Models: map[string]activities.Model{"gpt": m}})

	h, res, err := agent.Run(ctxT(t), c, agent.RunOptions{TaskQueue: tq, Model: "gpt", Message: "look up"})
	require.NoError(t, err)
	require.Equal(t, workflow.StatusCompleted, res.Status)
	assert.Positive(t, web.authorized.Load(), "the real URL connected")
	byID := map[string]workflow.TraceLine{}
	for _, l := range res.Trace {
		byID[l.CallID] = l
	}
	assert.Nil(t, byID["l1"].Error)
	assert.Contains(t, string(byID["l1"].Result), "found ord-4821")
	require.NotNil(t, byID["l2"].Error, "the call on the server taken down failed")
	t.Logf("l2: %s", *byID["l2"].Error)
	assert.Contains(t, *byID["l2"].Error, "/mcp?token=***&api_key=***", "the error names the URL, redacted")
	noURLSecret(t, "trace", mustJSON(res.Trace))

	hist := history(t, c, h.WorkflowID, h.RunID)
	payloads := payloadText(t, hist)
	assert.Contains(t, payloads, "found ord-4821", "control: the payloads were decoded")
	noURLSecret(t, "payloads", payloads)
	b, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(hist)
	require.NoError(t, err)
	assert.Contains(t, string(b), "mcp.TransportError", "control: the failure is in the history's JSON")
	noURLSecret(t, "history", string(b))
	assert.NotContains(t, string(b), web.url)
}

// The CLI never prints a URL's secrets: not in 'tulip mcp tools' (up or
// unreachable), not in a usage error, not in the resume command a chat
// interrupted for approval prints.
func TestCLIMCPURLSecretsNeverPrinted(t *testing.T) {
	web := newMCPHTTPServer(t)

	stdout, stderr, code := runCLI(t, "mcp", "tools", "--mcp-url", "web="+web.url)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "lookup")
	noURLSecret(t, "mcp tools", stdout+stderr)

	f := newFakeOpenAI(t, toolCalls([3]string{"l1", "lookup", `{"q": "x"}`}), answer("done"))
	stdout, stderr, code = runCLI(t, "chat", "--base-url", f.URL+"/v1", "--model", "m", "--json",
		"--db", filepath.Join(t.TempDir(), "chat.db"), "--mcp-url", "web="+web.url, "--approve-destructive", "look up")
	require.Equal(t, 0, code, stderr)
	t.Logf("chat stderr:\n%s", stderr)
	m := regexp.MustCompile(`(?m)^  tulip (resume .*)$`).FindStringSubmatch(stderr)
	require.Len(t, m, 2, "the resume command is printed: %s", stderr)
	assert.Contains(t, m[1], "--mcp-url 'web=http://***@127.0.0.1:", "the URL is shown redacted")
	assert.Contains(t, m[1], "/mcp?token=***&api_key=***'")
	noURLSecret(t, "chat", stdout+stderr)

	// No NAME=: the usage error quotes the value.
	noQuery := strings.Split(web.url, "?")[0]
	_, stderr, code = runCLI(t, "mcp", "tools", "--mcp-url", noQuery)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "want NAME=URL")
	noURLSecret(t, "usage error", stderr)

	web.down()
	_, stderr, code = runCLI(t, "mcp", "tools", "--mcp-url", "web="+web.url)
	assert.Equal(t, 1, code)
	t.Logf("unreachable: %s", stderr)
	assert.Contains(t, stderr, `mcp: server "web": cannot connect`)
	noURLSecret(t, "unreachable", stderr)
}
