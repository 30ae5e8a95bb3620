package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
)

// These tests run real MCP servers from npm that nobody here wrote
// (tests/mcp-servers, pinned by its package-lock.json), as stdio children.

// nodeServer is the command that runs the npm package pkg's server, or
// skips the test (fails it under CI=true) when node or the package is
// missing.
func nodeServer(t *testing.T, pkg string, args ...string) []string {
	t.Helper()
	missing := func(what string) {
		msg := fmt.Sprintf("%s: run scripts/install-test-deps", what)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	script, err := filepath.Abs(filepath.Join("..", "tests", "mcp-servers", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	require.NoError(t, err)
	if _, err := os.Stat(script); err != nil {
		missing(fmt.Sprintf("%s is not installed in tests/mcp-servers", pkg))
	}
	return append([]string{node, script}, args...)
}

// annotations prints the real list and returns it by MCP name.
func annotations(t *testing.T, ts *Toolset) map[string]ToolInfo {
	t.Helper()
	infos, err := ts.Describe(ctxT(t))
	require.NoError(t, err)
	byName := map[string]ToolInfo{}
	for _, in := range infos {
		b, _ := json.Marshal(in.Annotations)
		t.Logf("%s %-28s %-60s -> %s", ts.Name(), in.MCPName, b, in.Behaviour)
		byName[in.MCPName] = in
	}
	return byName
}

func text(t *testing.T, out tulip.ToolOutput) string {
	t.Helper()
	var sc struct{ Content string }
	require.NoError(t, json.Unmarshal(out.Result, &sc), "%s", out.Result)
	return sc.Content
}

// @modelcontextprotocol/server-filesystem: its annotations as listed, what
// tulip makes of them, files written on disk, a real isError, and a child
// killed mid-session.
func TestFilesystemServer(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("no"), 0o644))
	ts := newToolset(t, Server{Name: "fs", Command: nodeServer(t, "server-filesystem", dir), Trust: true, ApproveDestructive: true}, Options{})

	tools := annotations(t, ts)
	f := false
	tr := true
	// As server-filesystem 2026.8.31 lists them (on the wire: write_file
	// {"readOnlyHint":false,"idempotentHint":true,"destructiveHint":true,
	// "openWorldHint":false}, edit_file the same with idempotentHint false,
	// the read tools {"readOnlyHint":true,"openWorldHint":false}).
	for name, want := range map[string]*sdk.ToolAnnotations{
		"write_file":       {IdempotentHint: true, DestructiveHint: &tr, OpenWorldHint: &f},
		"edit_file":        {DestructiveHint: &tr, OpenWorldHint: &f},
		"move_file":        {DestructiveHint: &tr, OpenWorldHint: &f},
		"create_directory": {IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
		"read_text_file":   {ReadOnlyHint: true, OpenWorldHint: &f},
		"list_directory":   {ReadOnlyHint: true, OpenWorldHint: &f},
	} {
		assert.Equal(t, want, tools[name].Annotations, name)
	}
	// What a trusted server with --approve-destructive comes to.
	for name, want := range map[string]string{
		"write_file":       "asks approval; served on repeat",
		"edit_file":        "asks approval; runs every time",
		"move_file":        "asks approval; runs every time",
		"create_directory": "served on repeat",
		"read_text_file":   "runs every time",
		"list_directory":   "runs every time",
	} {
		assert.Equal(t, want, tools[name].Behaviour.String(), name)
	}
	assert.Contains(t, string(tools["write_file"].Spec.Parameters), `"content"`)

	// Calls do what the server does: the file is on disk.
	out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "write_file", CallID: "c1", IdempotencyKey: "k1",
		Arguments: fmt.Sprintf(`{"path": %q, "content": "refund 120.50 for ord-4821\n"}`, filepath.Join(dir, "note.txt"))})
	require.NoError(t, err)
	assert.Contains(t, text(t, out), "Successfully wrote to")
	b, err := os.ReadFile(filepath.Join(dir, "note.txt"))
	require.NoError(t, err)
	assert.Equal(t, "refund 120.50 for ord-4821\n", string(b))
	out, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "read_text_file", Arguments: fmt.Sprintf(`{"path": %q}`, filepath.Join(dir, "note.txt"))})
	require.NoError(t, err)
	assert.Equal(t, "refund 120.50 for ord-4821\n", text(t, out))

	// A real tool error: a path outside the allowed directory.
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "read_text_file", Arguments: fmt.Sprintf(`{"path": %q}`, filepath.Join(outside, "secret.txt"))})
	ae := appErr(t, err)
	t.Logf("isError: %s", ae.Message())
	assert.Equal(t, string(ErrToolError), ae.Type())
	assert.True(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), "Access denied")
	assert.Contains(t, ae.Message(), "outside allowed directories")
	// This server answers an unknown tool with isError (where a Go SDK
	// server answers a JSON-RPC error: TestCallErrors): a ToolError all the
	// same, not retried.
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "no_such_tool", Arguments: `{}`})
	ae = appErr(t, err)
	assert.Equal(t, string(ErrToolError), ae.Type())
	assert.True(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), "Tool no_such_tool not found")

	// Kill the child mid-session: the next call spawns it again.
	ts.mu.Lock()
	cmd := ts.cmd
	ts.mu.Unlock()
	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, func() bool { return !connected(ts) }, 10*time.Second, 10*time.Millisecond)
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "write_file", CallID: "c2", IdempotencyKey: "k2",
		Arguments: fmt.Sprintf(`{"path": %q, "content": "after the kill"}`, filepath.Join(dir, "after.txt"))})
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(dir, "after.txt"))
	require.NoError(t, err)
	assert.Equal(t, "after the kill", string(b))
	assert.Equal(t, 2, connects(ts))
	ts.mu.Lock()
	second := ts.cmd
	ts.mu.Unlock()
	assert.NotEqual(t, cmd.Process.Pid, second.Process.Pid)

	// Close stops the child.
	require.NoError(t, ts.Close())
	assert.NotNil(t, second.ProcessState, "the child has exited")
}

// A call killed with its child: the error is retryable (a transport
// error when the request never reached the child, ambiguous when it was
// written before the child was gone), and the next call (Temporal's
// retry) succeeds on a new child.
func TestFilesystemServerKilledDuringCall(t *testing.T) {
	dir := t.TempDir()
	ts := newToolset(t, Server{Name: "fs", Command: nodeServer(t, "server-filesystem", dir)}, Options{})
	_, err := ts.Tools(ctxT(t))
	require.NoError(t, err)
	ts.mu.Lock()
	cmd := ts.cmd
	ts.mu.Unlock()
	require.NoError(t, cmd.Process.Kill())
	// Right after the kill the call may still go to the dead child.
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "list_allowed_directories", Arguments: `{}`})
	if err != nil {
		ae := appErr(t, err)
		assert.Contains(t, []string{string(ErrTransport), string(tulip.Ambiguous)}, ae.Type(), "%v", err)
		assert.False(t, ae.NonRetryable())
		out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "list_allowed_directories", Arguments: `{}`})
		require.NoError(t, err)
		assert.Contains(t, text(t, out), filepath.Base(dir))
	}
}

// @modelcontextprotocol/server-memory: its annotations as listed, and the
// knowledge graph it keeps (read back with its own tool and from its file,
// MEMORY_FILE_PATH, which is passed as Env).
func TestMemoryServer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "memory.jsonl")
	ts := newToolset(t, Server{Name: "memory", Command: nodeServer(t, "server-memory"),
		Env: map[string]string{"MEMORY_FILE_PATH": file}, Trust: true, ApproveDestructive: true}, Options{})
	tools := annotations(t, ts)
	f, tr := false, true
	for name, want := range map[string]*sdk.ToolAnnotations{
		"create_entities":  {DestructiveHint: &f, OpenWorldHint: &f},
		"add_observations": {DestructiveHint: &f, OpenWorldHint: &f},
		"delete_entities":  {DestructiveHint: &tr, IdempotentHint: true, OpenWorldHint: &f},
		"read_graph":       {ReadOnlyHint: true, DestructiveHint: &f, IdempotentHint: true, OpenWorldHint: &f},
	} {
		assert.Equal(t, want, tools[name].Annotations, name)
	}
	for name, want := range map[string]string{
		"create_entities": "runs every time",
		"delete_entities": "asks approval; served on repeat",
		"read_graph":      "runs every time", // read-only: a read is never served from the log
	} {
		assert.Equal(t, want, tools[name].Behaviour.String(), name)
	}

	_, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "create_entities", CallID: "c1", IdempotencyKey: "k1", Arguments: `{"entities": [
		{"name": "ord-4821", "entityType": "order", "observations": ["refunded 120.50"]},
		{"name": "alice", "entityType": "customer", "observations": []}]}`})
	require.NoError(t, err)
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "create_relations", Arguments: `{"relations": [{"from": "alice", "to": "ord-4821", "relationType": "placed"}]}`})
	require.NoError(t, err)
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "add_observations", Arguments: `{"observations": [{"entityName": "alice", "contents": ["prefers email"]}]}`})
	require.NoError(t, err)

	out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "read_graph", Arguments: `{}`})
	require.NoError(t, err)
	t.Logf("read_graph: %s", out.Result)
	var graph struct {
		Entities []struct {
			Name, EntityType string
			Observations     []string
		}
		Relations []struct{ From, To, RelationType string }
	}
	require.NoError(t, json.Unmarshal(out.Result, &graph))
	require.Len(t, graph.Entities, 2)
	assert.Equal(t, "ord-4821", graph.Entities[0].Name)
	assert.Equal(t, []string{"refunded 120.50"}, graph.Entities[0].Observations)
	assert.Equal(t, []string{"prefers email"}, graph.Entities[1].Observations)
	require.Len(t, graph.Relations, 1)
	assert.Equal(t, "placed", graph.Relations[0].RelationType)

	// The same graph is in its file, one JSON object a line.
	fh, err := os.Open(file)
	require.NoError(t, err)
	defer fh.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		lines = append(lines, l)
	}
	require.Len(t, lines, 3)
	assert.Equal(t, "entity", lines[0]["type"])
	assert.Equal(t, "ord-4821", lines[0]["name"])
	assert.Equal(t, "relation", lines[2]["type"])

	// The env value is a secret: a spec that would carry it is redacted.
	specs, err := ts.Tools(ctxT(t))
	require.NoError(t, err)
	b, _ := json.Marshal(specs)
	assert.NotContains(t, string(b), file)
}

// environ is the environment a stdio test server was started with.
func environ(t *testing.T, ts *Toolset) map[string]string {
	t.Helper()
	out, err := ts.Call(ctxT(t), tulip.ToolInput{Tool: "environ", Arguments: `{}`})
	require.NoError(t, err)
	var blocks []struct{ Text string }
	require.NoError(t, json.Unmarshal(out.Result, &blocks))
	require.Len(t, blocks, 1)
	env := map[string]string{}
	for _, kv := range strings.Split(blocks[0].Text, "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// A stdio server, trusted or not, gets a minimal environment (PATH, HOME,
// ...) and its Env, not the worker's: an API key in the worker's
// environment does not reach it.
func TestStdioServerEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	t.Setenv("PATH", os.Getenv("PATH"))
	t.Setenv("HOME", "/home/tulip-test")
	for _, trust := range []bool{false, true} {
		s := stdioServer(t, "child")
		s.Trust = trust
		s.Env["TULIP_MODE"] = "fast" // short: not redacted
		ts := newToolset(t, s, Options{})
		env := environ(t, ts)
		t.Logf("trust=%v: %d variables", trust, len(env))
		assert.NotContains(t, env, "OPENAI_API_KEY", "trust=%v", trust)
		for k, v := range env {
			assert.NotContains(t, v, "sk-test-secret", "trust=%v: %s", trust, k)
		}
		assert.Equal(t, os.Getenv("PATH"), env["PATH"], "trust=%v", trust)
		assert.Equal(t, "/home/tulip-test", env["HOME"], "trust=%v", trust)
		assert.Equal(t, "fast", env["TULIP_MODE"], "trust=%v: Env is given", trust)
		assert.Equal(t, "1", env[stdioServerEnv], "trust=%v", trust)
	}
}
