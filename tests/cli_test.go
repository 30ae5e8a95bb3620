package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/dedup"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// Bad input: each is one clear line on stderr and a non-zero exit, never a
// stack trace.
func TestCLIBadInput(t *testing.T) {
	addr := server.Address()
	okRun := `{"runs": [{"turns": [{"tool_calls": [{"id": "c1", "name": "mint_case_id", "arguments": "{}"}]}]}]}`
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, ""},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"run without a scenario", []string{"run"}, 2, "usage: tulip run"},
		{"missing scenario file", []string{"run", "--scenario", "/nonexistent/s.json", "--address", addr}, 1, "cannot read scenario"},
		{"malformed scenario", []string{"run", "--scenario", writeFile(t, "bad.json", `{"runs": [`), "--address", addr}, 1, "not a JSON object"},
		{"scenario with no runs", []string{"run", "--scenario", writeFile(t, "empty.json", `{"runs": []}`), "--address", addr}, 1, "no runs"},
		{"unknown field", []string{"run", "--scenario", writeFile(t, "field.json", `{"runs": [{"turns": [], "model": "x"}]}`), "--address", addr}, 1, `unknown field "model"`},
		{"arguments not a string", []string{"run", "--scenario", writeFile(t, "args.json",
			`{"runs": [{"turns": [{"tool_calls": [{"id": "c1", "name": "mint_case_id", "arguments": {}}]}]}]}`), "--address", addr}, 1, "arguments"},
		{"unknown hook", []string{"run", "--scenario", writeFile(t, "hook.json", `{"runs": [{"hooks": ["no_such_hook"], "turns": []}]}`), "--address", addr}, 1, `unknown hook "no_such_hook"`},
		{"duplicate call id", []string{"run", "--scenario", writeFile(t, "dup.json",
			`{"runs": [{"turns": [{"tool_calls": [{"id": "c1", "name": "mint_case_id", "arguments": "{}"}, {"id": "c1", "name": "mint_case_id", "arguments": "{}"}]}]}]}`), "--address", addr}, 1, `"c1" is used twice`},
		{"unreachable address", []string{"run", "--scenario", writeFile(t, "ok.json", okRun), "--address", "127.0.0.1:1"}, 1, "cannot reach Temporal at 127.0.0.1:1"},
		{"inspect without a server", []string{"inspect", "t-1"}, 2, "no server"},
		{"inspect unknown thread", []string{"inspect", "no-such-thread", "--address", addr}, 1, "no-such-thread"},
		{"resume unknown thread", []string{"resume", "no-such-thread", "--answer", "x", "--address", addr}, 1, "no-such-thread"},
		{"replay missing file", []string{"replay", "/nonexistent/h.json"}, 1, "/nonexistent/h.json"},
		{"bad flag", []string{"demo", "--frobnicate"}, 2, "frobnicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TEMPORAL_ADDRESS", "")
			stdout, stderr, code := runCLI(t, c.args...)
			assert.Equal(t, c.code, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			if c.want != "" {
				assert.Contains(t, stderr, c.want)
				assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
				assert.True(t, strings.HasPrefix(stderr, "tulip: "), stderr)
			}
			assert.NotContains(t, stderr, "goroutine ")
		})
	}
}

// An unknown tool in a scenario is not a CLI error: the run rejects the
// call (rule 1), as the unknown-tool-rejected conformance case requires.
func TestCLIUnknownToolReachesTheRuntime(t *testing.T) {
	f := writeFile(t, "s.json", `{"runs": [{"turns": [{"tool_calls": [{"id": "c1", "name": "drop_database", "arguments": "{}"}]}]}]}`)
	stdout, stderr, code := runCLI(t, "run", "--scenario", f, "--json", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	lines, _ := parseTrace(t, stdout)
	require.Len(t, lines, 1)
	assert.Equal(t, "rejected", string(lines[0].Outcome))
	assert.Contains(t, *lines[0].Error, `unknown tool "drop_database"`)
}

// The demo's table, then history export, replay and inspect of its thread.
func TestCLIDemoHistoryReplayInspect(t *testing.T) {
	stdout, stderr, code := runCLI(t, "demo", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{"issue_refund  1 of 3 calls", "page_oncall   1 of 3 calls", "mint_case_id  2 of 2 calls",
		"cached (record 0, earlier turn)", "cached (record 5, same response)", "Refunds billing actually made: 1\n"} {
		assert.Contains(t, stdout, want)
	}
	thread := regexp.MustCompile(`Run 1 \((\S+)\)`).FindStringSubmatch(stdout)
	require.Len(t, thread, 2, stdout)

	out := filepath.Join(t.TempDir(), "h.json")
	_, stderr, code = runCLI(t, "history", thread[1], "-o", out, "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code = runCLI(t, "replay", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "ok   "+out)

	stdout, stderr, code = runCLI(t, "inspect", thread[1], "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "agent support: 9 records")
	assert.Regexp(t, `served from the log: [1-9] of 9 calls`, stdout)
	// One word for a served call: the table and the log say the same.
	assert.Contains(t, stdout, "cached (record 0, earlier turn)")
	assert.NotContains(t, stdout, "served (", "the table says cached, as the trace does")
}

// Why did it run again? A refund repeated with another amount and a repeat
// of a tool that is not idempotent each say so in the trace table, in
// 'tulip inspect' and in 'tulip explain', which ranks the tool's records
// and finds an equal record in another agent's log.
func TestCLIExplain(t *testing.T) {
	call := func(id, name, args string) map[string]string {
		return map[string]string{"id": id, "name": name, "arguments": args}
	}
	turn := func(calls ...map[string]string) map[string]any { return map[string]any{"tool_calls": calls} }
	sc := map[string]any{"runs": []map[string]any{
		{"thread_id": "t", "turns": []map[string]any{
			turn(call("c1", "issue_refund", `{"order_id": "ord-4821", "amount": 120.0}`)),
			turn(call("c2", "issue_refund", `{"order_id": "ord-4821", "amount": 120.5}`)),
			turn(call("c3", "mint_case_id", `{}`)),
			turn(call("c4", "mint_case_id", `{}`)),
			{"text": "done"}}},
		{"thread_id": "t", "agent": "billing", "turns": []map[string]any{
			turn(call("c5", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`)), {"text": "done"}}},
	}}
	file := filepath.Join(t.TempDir(), "explain.json")
	b, err := json.Marshal(sc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, b, 0o644))

	stdout, stderr, code := runCLI(t, "run", "--scenario", file, "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "executed (nearest: record 0, /amount 120.0 → 120.5)")
	assert.Contains(t, stdout, "executed (nearest: record 2, same arguments, tool not idempotent)")
	thread := regexp.MustCompile(`Run 1 \((\S+)\)`).FindStringSubmatch(stdout)
	require.Len(t, thread, 2, stdout)

	stdout, stderr, code = runCLI(t, "inspect", thread[1], "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "executed (nearest: record 0, /amount 120.0 → 120.5)")
	assert.Contains(t, stdout, "executed (nearest: record 2, same arguments, tool not idempotent)")

	stdout, stderr, code = runCLI(t, "explain", thread[1], "c2", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "it ran: nearest: record 0, /amount 120.0 → 120.5\nwhy: its arguments differ")
	assert.Regexp(t, `(?m)^1\s+0\s+c1\s+1\s+executed\s+1\s+/amount 120.0 → 120.5$`, stdout)

	stdout, stderr, code = runCLI(t, "explain", thread[1], "c4", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "why: the tool is not declared idempotent")
	assert.Regexp(t, `(?m)^1\s+2\s+c3\s+3\s+executed\s+0\s+same values$`, stdout)

	stdout, stderr, code = runCLI(t, "explain", thread[1], "c1", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "it ran: no earlier record of issue_refund in this log")
	assert.Contains(t, stdout, "agent billing has an equal record (0, call c5)")

	stdout, stderr, code = runCLI(t, "explain", thread[1], "c5", "--agent", "billing", "--json", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	var ex struct {
		Call struct {
			Seq      int             `json:"seq"`
			NearMiss *dedup.NearMiss `json:"near_miss"`
		} `json:"call"`
		Candidates  []dedup.Candidate `json:"candidates"`
		OtherAgents []struct {
			Agent  string `json:"agent"`
			CallID string `json:"call_id"`
		} `json:"other_agents"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &ex), stdout)
	assert.Nil(t, ex.Call.NearMiss, "agents never see each other's records")
	assert.Empty(t, ex.Candidates)
	require.Len(t, ex.OtherAgents, 1, "of support's two refunds, the one with equal values")
	assert.Equal(t, "support", ex.OtherAgents[0].Agent)
	assert.Equal(t, "c1", ex.OtherAgents[0].CallID)
	_, stderr, code = runCLI(t, "explain", thread[1], "c9", "--address", server.Address())
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)
	assert.Contains(t, stderr, "no record of call c9")
}
