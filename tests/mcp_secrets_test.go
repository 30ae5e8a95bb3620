package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/temporalproto"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/mcp"
	"github.com/tulip-temporal/tulip/openaimodel"
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
	m, err := openaimodel.New(openaimodel.Options{BaseURL: f.URL + "/v1", Model: "gpt-test"})
	require.NoError(t, err)
	startWorker(t, c, tq, workerplugin.Options{Toolsets: workerplugin.PublicToolsets(set.Toolsets()), Models: map[string]activities.Model{"gpt": activities.PublicModel(m)}})

	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "gpt", Message: "look up"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Positive(t, web.authorized.Load(), "the real URL connected")
	byID := map[string]agentrun.TraceLine{}
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

var (
	envServerOnce sync.Once
	envServerBin  string
	envServerErr  error
	envServerOut  []byte
)

// mcpEnvServer builds ./mcpenvserver (an MCP server on stdio whose tool
// env_digest tells a variable's length and SHA-256) once per test binary.
func mcpEnvServer(t *testing.T) string {
	t.Helper()
	envServerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tulip-mcpenvserver")
		if err != nil {
			envServerErr = err
			return
		}
		envServerBin = filepath.Join(dir, "mcpenvserver")
		envServerOut, envServerErr = exec.Command("go", "build", "-o", envServerBin, "./mcpenvserver").CombinedOutput()
	})
	require.NoError(t, envServerErr, "%s", envServerOut)
	return envServerBin
}

// An Env value given to a stdio server reaches the server (it writes the
// value to a file, and the SHA-256 it returns is the value's) and never the
// run's history: not the tool list, not an activity's input, not a result
// (the tool returns a digest, not the value: a tool that returns a secret
// puts it in history as its result, which no configuration can prevent).
// The worker's own OPENAI_API_KEY does not reach the server at all.
func TestMCPEnvValuesNeverEnterHistory(t *testing.T) {
	const envSecret = "tok-ENV-zq93-kx" // '-' is not base64: no base64 text holds it by chance
	const workerSecret = "sk-test-secret"
	t.Setenv("OPENAI_API_KEY", workerSecret)
	bin := mcpEnvServer(t)
	dir := t.TempDir()
	gotFile, workerFile := filepath.Join(dir, "secret-token.txt"), filepath.Join(dir, "openai-key.txt")
	f := newFakeOpenAI(t,
		toolCalls([3]string{"e1", "env_digest", mustJSON(map[string]string{"name": "SECRET_TOKEN", "file": gotFile})},
			[3]string{"e2", "env_digest", mustJSON(map[string]string{"name": "OPENAI_API_KEY", "file": workerFile})}),
		answer("done"),
	)
	set, err := mcp.Open(context.Background(), []mcp.Server{{Name: "envs", Command: []string{bin},
		Env: map[string]string{"SECRET_TOKEN": envSecret}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = set.Close() })
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	m, err := openaimodel.New(openaimodel.Options{BaseURL: f.URL + "/v1", Model: "gpt-test"})
	require.NoError(t, err)
	startWorker(t, c, tq, workerplugin.Options{Toolsets: workerplugin.PublicToolsets(set.Toolsets()), Models: map[string]activities.Model{"gpt": activities.PublicModel(m)}})

	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "gpt", Message: "check"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, "Bearer "+workerSecret, f.authHdr[0], "the worker's key is the model's")

	// The server received the value: where its effect lands, and in the
	// digest the run recorded.
	b, err := os.ReadFile(gotFile)
	require.NoError(t, err)
	assert.Equal(t, envSecret, string(b))
	sum := sha256.Sum256([]byte(envSecret))
	type digest struct {
		Set    bool   `json:"set"`
		Len    int    `json:"len"`
		SHA256 string `json:"sha256"`
	}
	digests := map[string]digest{}
	for _, l := range res.Trace {
		require.Nil(t, l.Error, "%s", l.CallID)
		var d digest
		require.NoError(t, json.Unmarshal(l.Result, &d), "%s", l.Result)
		digests[l.CallID] = d
	}
	assert.Equal(t, digest{Set: true, Len: len(envSecret), SHA256: hex.EncodeToString(sum[:])}, digests["e1"])
	// The worker's OPENAI_API_KEY is not in the server's environment.
	assert.False(t, digests["e2"].Set, "OPENAI_API_KEY reached the stdio server")
	b, err = os.ReadFile(workerFile)
	require.NoError(t, err)
	assert.Empty(t, string(b))

	// Nowhere in the history: every decoded payload, and the history's JSON.
	hist := history(t, c, h.WorkflowID, h.RunID)
	payloads := payloadText(t, hist)
	assert.Contains(t, payloads, hex.EncodeToString(sum[:]), "control: the payloads were decoded")
	assert.Contains(t, payloads, "env_digest", "control: the tool list is in them")
	hj, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(hist)
	require.NoError(t, err)
	for what, text := range map[string]string{"payloads": payloads, "history": string(hj), "trace": mustJSON(res.Trace)} {
		assert.NotContains(t, text, envSecret, what)
		assert.NotContains(t, text, workerSecret, what)
	}
}
