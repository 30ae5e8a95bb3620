package tests

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/internal/scenario"
)

// runCLI runs the tulip CLI in process.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(ctxT(t), args, &out, &errb)
	return out.String(), errb.String(), code
}

// parseTrace splits `tulip run --json` output into lines and the summary.
func parseTrace(t testing.TB, out string) ([]scenario.Line, scenario.Summary) {
	t.Helper()
	var lines []scenario.Line
	var sum scenario.Summary
	for _, raw := range strings.Split(strings.TrimSpace(out), "\n") {
		if raw == "" {
			continue
		}
		var probe map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(raw), &probe), "stdout holds only JSON lines: %q", raw)
		if s, ok := probe["summary"]; ok {
			require.NoError(t, json.Unmarshal(s, &sum))
			continue
		}
		var l scenario.Line
		require.NoError(t, json.Unmarshal([]byte(raw), &l))
		lines = append(lines, l)
	}
	return lines, sum
}

// TestConformance runs every public conformance case through `tulip run
// --scenario FILE --json` against the embedded server, and checks its trace
// as the shared check script does.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob("../testdata/conformance/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	cases, err := scenario.LoadCases("../testdata/conformance")
	require.NoError(t, err)
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Log("rule:", c.Rule)
			out, errOut, _ := runCLI(t, "run", "--scenario", files[i], "--json", "--address", server.Address())
			lines, sum := parseTrace(t, out)
			require.NotNil(t, sum.BodyInvocations, "no summary line; stderr: %s", errOut)
			for _, e := range c.Check(lines, sum) {
				t.Error(e)
			}
		})
	}
}

// TestNearMissThroughTheCLI plays the near-miss cases (testdata/nearmiss,
// every reason of docs/rules.md "Why did it run again?") through 'tulip
// run --scenario FILE --json' against the embedded server.
func TestNearMissThroughTheCLI(t *testing.T) {
	files, err := filepath.Glob("../testdata/nearmiss/*.json")
	require.NoError(t, err)
	cases, err := scenario.LoadCases("../testdata/nearmiss")
	require.NoError(t, err)
	require.Len(t, cases, len(files))
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			out, errOut, _ := runCLI(t, "run", "--scenario", files[i], "--json", "--address", server.Address())
			lines, sum := parseTrace(t, out)
			require.NotNil(t, sum.BodyInvocations, "no summary line; stderr: %s", errOut)
			for _, e := range c.Check(lines, sum) {
				t.Error(e)
			}
		})
	}
}
