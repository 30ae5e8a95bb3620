package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tsMissing skips a test that needs node or npm packages that are not
// there, naming what installs them; under CI=true it fails instead.
func tsMissing(t *testing.T, what string) {
	t.Helper()
	msg := what + ": run scripts/install-test-deps"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// tsClient returns node and clients/ts, built as docs/protocol.md says
// (cd clients/ts && npm ci && npm run build): its npm packages, pinned by
// its package-lock.json, installed with npm ci when missing, and its
// sources compiled by tsc into clients/ts/dist (ignored by git).
func tsClient(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		tsMissing(t, "node is not installed")
	}
	dir, err = filepath.Abs(filepath.Join("..", "clients", "ts"))
	require.NoError(t, err)
	npm, err := exec.LookPath("npm")
	if err != nil {
		tsMissing(t, "npm is not installed")
	}
	for _, m := range []string{"@temporalio/client", "typescript", "json-schema-to-typescript", "@types/node"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", m)); err == nil {
			continue
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			tsMissing(t, "npm ci in clients/ts failed: "+strings.TrimSpace(string(out)))
		}
		break
	}
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "dist")))
	cmd := exec.CommandContext(ctxT(t), npm, "run", "build", "--silent")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm run build in clients/ts:\n%s", out)
	return node, dir
}

// TestTSClient runs clients/ts's own tests (node's test runner, against
// `tulip dev` through the validating proxy): a thread continued twice
// serves its refund (trace outcome cached) and names each previous run;
// thin records and results held by reference are read back in full; an
// interrupt is reached, awaited by its memo and resumed by update and by
// signal (a call held after the interrupted one goes through the hooks when
// performed: block_page_oncall cancels it), and followed across
// continue-as-new to the next one; refusals (a busy thread, a stale interrupt, a misspelled resume,
// a resume after close) and run failures (tulip.BadInput,
// tulip.MaxTurnsExceeded) come back as their typed errors. Every payload
// the client received validates against docs/schemas, and the generated
// types are those docs/schemas generate now.
func TestTSClient(t *testing.T) {
	node, dir := tsClient(t)

	gen := exec.CommandContext(ctxT(t), node, filepath.Join("scripts", "gen-types.mjs"), "--check")
	gen.Dir = dir
	out, err := gen.CombinedOutput()
	require.NoError(t, err, "%s", out)

	addr, _, _ := devUp(t, "--port", "0", "--headless")
	proxy := startWireProxy(t, addr)

	tests, err := filepath.Glob(filepath.Join(dir, "dist", "test", "*.test.js"))
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	start := time.Now()
	cmd := exec.CommandContext(ctxT(t), node, append([]string{"--test", "--test-reporter=spec"}, tests...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+proxy.addr)
	out, err = cmd.CombinedOutput()
	t.Logf("node --test (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	require.NoError(t, err, "clients/ts tests failed")
	count := func(what string) string {
		if m := regexp.MustCompile(`(?m)^ℹ ` + what + ` (\d+)$`).FindStringSubmatch(string(out)); m != nil {
			return m[1]
		}
		return ""
	}
	assert.NotEmpty(t, count("tests"))
	assert.Equal(t, count("tests"), count("pass"), "every test passed")
	assert.NotEqual(t, "0", count("tests"))

	assert.Empty(t, proxy.Violations(), "payloads that do not validate against docs/schemas")
	seen := proxy.Seen()
	for _, kind := range []string{
		"result", "failure tulip.BadInput", "failure tulip.MaxTurnsExceeded",
		"query tulip.state", "query tulip.thread", "query tulip.page", "memo tulip_interrupt",
		"update tulip.resume", "update tulip.resume refused tulip.StaleInterrupt", "update tulip.resume refused tulip.BadInput",
	} {
		assert.Positive(t, seen[kind], "the client received no %s (checked: %v)", kind, slices.Sorted(mapKeysOf(seen)))
	}
}

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
