package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
)

func TestCLIMCPToolsHelp(t *testing.T) {
	for _, args := range [][]string{{"mcp", "tools", "--help"}, {"mcp", "tools", "-h"}, {"mcp", "--help"}} {
		stdout, stderr, code := runCLI(t, args...)
		assert.Equal(t, 0, code, "%v: %s", args, stderr)
		assert.Empty(t, stderr)
		assert.True(t, strings.HasPrefix(stdout, "usage: tulip mcp tools"), "%v: %q", args, stdout)
		for _, flag := range []string{"-mcp NAME=COMMAND ARGS...", "-mcp-url NAME=URL", "-mcp-trust NAME", "-approve-destructive", "-mcp-header NAME=Key: Value", "-mcp-env NAME=KEY=VALUE", "-json"} {
			assert.Contains(t, stdout, flag, "%v", args)
		}
	}
	stdout, _, code := runCLI(t, "help")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "tulip mcp tools --mcp NAME=COMMAND ARGS...")
	for _, cmd := range []string{"chat", "dev", "resume"} {
		stdout, _, code := runCLI(t, cmd, "--help")
		assert.Equal(t, 0, code)
		assert.Contains(t, stdout, "-mcp NAME=COMMAND ARGS...", cmd)
	}
}

// Bad input: one line on stderr, exit 2 for usage, 1 for a server that
// cannot be reached; a secret never appears in the line.
func TestCLIMCPToolsBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"mcp"}, 2, "usage: tulip mcp tools"},
		{"unknown subcommand", []string{"mcp", "servers"}, 2, "usage: tulip mcp tools"},
		{"no server", []string{"mcp", "tools"}, 2, "usage: tulip mcp tools"},
		{"bad flag", []string{"mcp", "tools", "--frobnicate"}, 2, "frobnicate"},
		{"no name", []string{"mcp", "tools", "--mcp", "node x.js"}, 2, `--mcp "node x.js": want NAME=COMMAND ARGS...`},
		{"unterminated quote", []string{"mcp", "tools", "--mcp", `fs=node "x.js`}, 2, `--mcp fs: unterminated " quote`},
		{"bad server name", []string{"mcp", "tools", "--mcp", "f.s=node x.js"}, 2, `mcp: server "f.s": Name must be`},
		{"trust of no server", []string{"mcp", "tools", "--mcp", "fs=node x.js", "--mcp-trust", "fx"}, 2, `--mcp-trust: no --mcp or --mcp-url server is named "fx"`},
		{"two servers one name", []string{"mcp", "tools", "--mcp", "fs=a", "--mcp-url", "fs=http://x"}, 2, `two MCP servers are named "fs"`},
		{"header without colon", []string{"mcp", "tools", "--mcp-url", "w=http://x", "--mcp-header", "w=sup3rs3cretvalue"}, 2, `--mcp-header for "w": want NAME=Key: Value`},
		{"env for a url server", []string{"mcp", "tools", "--mcp-url", "w=http://x", "--mcp-env", "w=TOKEN=sup3rs3cretvalue"}, 2, `Env is for a Command server`},
		{"bad idempotent", []string{"mcp", "tools", "--mcp", "fs=a", "--mcp-idempotent", "fs"}, 2, `--mcp-idempotent "fs": want NAME=TOOL`},
		{"bad check", []string{"mcp", "tools", "--mcp", "fs=a", "--mcp-check", "fs=refund"}, 2, `--mcp-check "fs=refund": want NAME=TOOL=CHECK`},
		{"self check", []string{"mcp", "tools", "--mcp", "fs=a", "--mcp-check", "fs=refund=refund"}, 2, `Checks tool "refund" cannot check itself`},
		{"check of no server", []string{"mcp", "tools", "--mcp", "fs=a", "--mcp-check", "fx=refund=status"}, 2, `--mcp-check: no --mcp or --mcp-url server is named "fx"`},
		{"cannot start", []string{"mcp", "tools", "--mcp", "fs=/nonexistent/server --flag", "--mcp-env", "fs=TOKEN=sup3rs3cretvalue"}, 1, `mcp: server "fs": cannot connect:`},
		{"mcp on resume without db", []string{"resume", "t", "--answer", "x", "--mcp", "fs=a"}, 2, "--mcp flags need --db"},
		{"bad mcp on dev", []string{"dev", "--mcp", "nope"}, 2, `--mcp "nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, c.args...)
			assert.Equal(t, c.code, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			assert.Contains(t, last, c.want)
			assert.True(t, strings.HasPrefix(last, "tulip: "), last)
			for _, l := range lines[:len(lines)-1] {
				assert.True(t, strings.HasPrefix(l, "connecting to"), "only progress before the error: %q", l)
			}
			assert.NotContains(t, stderr, "sup3rs3cretvalue")
		})
	}
}

// mcpServersDir is tests/mcp-servers with its npm packages, or skips
// (fails under CI=true).
func mcpServer(t *testing.T, pkg string) (node, script string) {
	t.Helper()
	missing := func(what string) {
		msg := what + ": run scripts/install-test-deps"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	script, err = filepath.Abs(filepath.Join("mcp-servers", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	require.NoError(t, err)
	if _, err := os.Stat(script); err != nil {
		missing(pkg + " is not installed in tests/mcp-servers")
	}
	return node, script
}

// `tulip mcp tools` against the real filesystem server: each tool, its
// annotations and what tulip does with it.
func TestCLIMCPTools(t *testing.T) {
	node, script := mcpServer(t, "server-filesystem")
	dir := t.TempDir()
	spec := fmt.Sprintf("fs=%s %s '%s'", node, script, dir)

	stdout, stderr, code := runCLI(t, "mcp", "tools", "--mcp", spec, "--mcp-trust", "fs", "--approve-destructive", "--json")
	require.Equal(t, 0, code, stderr)
	var rows []struct {
		Server, Tool, Behaviour, Why string
		Idempotent, Approval         bool
		Annotations                  map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
	byTool := map[string]int{}
	for i, r := range rows {
		byTool[r.Tool] = i
		assert.Equal(t, "fs", r.Server)
	}
	w := rows[byTool["write_file"]]
	assert.Equal(t, "asks approval; served on repeat", w.Behaviour)
	assert.Equal(t, map[string]any{"readOnlyHint": false, "idempotentHint": true, "destructiveHint": true, "openWorldHint": false}, w.Annotations)
	assert.Equal(t, "asks approval; runs every time", rows[byTool["edit_file"]].Behaviour)
	assert.Equal(t, "runs every time", rows[byTool["read_text_file"]].Behaviour)

	// The table, untrusted and prefixed: hints are shown, not used.
	stdout, stderr, code = runCLI(t, "mcp", "tools", "--mcp", spec, "--mcp-prefix", "fs", "--mcp-idempotent", "fs=read_text_file")
	require.Equal(t, 0, code, stderr)
	t.Logf("\n%s", stdout)
	assert.Regexp(t, `(?m)^SERVER\s+TOOL\s+ANNOTATIONS\s+TULIP\s+WHY$`, stdout)
	assert.Regexp(t, `(?m)^fs\s+fs_write_file\s+destructive,idempotent,openWorld=false\s+runs every time; holds if lost\s+untrusted server: hints ignored$`, stdout)
	assert.Regexp(t, `(?m)^fs\s+fs_read_text_file\s+readOnly,openWorld=false\s+served on repeat\s+Idempotent override$`, stdout)

	// A typo in an override is refused.
	_, stderr, code = runCLI(t, "mcp", "tools", "--mcp", spec, "--mcp-not-idempotent", "fs=write_fle")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `tulip: mcp: server "fs": NotIdempotent names tool "write_fle", which the server does not list`)

	// A check named in the config: shown; one the server does not list is
	// refused.
	stdout, stderr, code = runCLI(t, "mcp", "tools", "--mcp", spec, "--mcp-check", "fs=move_file=get_file_info")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^fs\s+move_file\s+.*runs every time; if lost, asks get_file_info\s+`, stdout)
	_, stderr, code = runCLI(t, "mcp", "tools", "--mcp", spec, "--mcp-check", "fs=move_file=file_status")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `tulip: mcp: server "fs": Checks names "file_status" as the check of tool "move_file", and the server lists no such tool`)
}

// `tulip dev --mcp` connects to the server, lists it, gives its toolset to
// the worker, and stops it on the way out.
func TestCLIDevWithMCP(t *testing.T) {
	node, script := mcpServer(t, "server-memory")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	args := []string{"dev", "--port", "0", "--headless", "--mcp", fmt.Sprintf("memory=%s %s", node, script),
		"--mcp-env", "memory=MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "m.jsonl"), "--mcp-trust", "memory"}
	go func() { done <- cli.Main(ctx, args, &out, &errb) }()
	waitForBanner(t, &out, &errb, done)
	assert.Contains(t, out.String(), `MCP server "memory": its tools are the worker's too`)
	assert.Contains(t, errb.String(), "connecting to 1 MCP server(s)...")
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
}
