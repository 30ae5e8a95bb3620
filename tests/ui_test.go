package tests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// devUp runs `tulip dev` in process with args until the test ends, and
// returns what its banner printed: the frontend address, the Web UI's
// workflows URL and the codec server's URL ("" when none).
func devUp(t *testing.T, args ...string) (addr, ui, codecURL string) {
	t.Helper()
	out := devBanner(t, args...)
	find := func(re string) string {
		if m := regexp.MustCompile(re).FindStringSubmatch(out); m != nil {
			return m[1]
		}
		return ""
	}
	return find(`--address (\S+)`), find(`Web UI: (\S+)`), find(`codec server for the UI: (\S+)`)
}

// devBanner runs `tulip dev` with args until the test ends, and returns
// its banner.
func devBanner(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- cli.Main(ctx, append([]string{"dev"}, args...), &out, &errb) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("dev did not stop")
		}
	})
	waitForBanner(t, &out, &errb, done)
	return out.String()
}

// devStartBound bounds how long `tulip dev` may take to print its banner: a
// bound for a hang, not a timing check. Under the test command's load (two
// packages at once on two cores, a server per package) a start has taken
// more than 30 s.
const devStartBound = 3 * time.Minute

// waitForBanner waits for `tulip dev`'s banner to end ("Ctrl-C stops it.")
// and fails the test, with dev's output as it is then, if dev exits first
// (done receives its exit code) or the banner takes longer than
// devStartBound.
func waitForBanner(t *testing.T, out, errb *syncBuffer, done <-chan int) {
	t.Helper()
	deadline := time.After(devStartBound)
	for !strings.Contains(out.String(), "Ctrl-C stops it.") {
		select {
		case code := <-done:
			t.Fatalf("dev exited (%d) before its banner; stdout: %s; stderr: %s", code, out.String(), errb.String())
		case <-deadline:
			t.Fatalf("dev did not come up in %s; stdout: %s; stderr: %s", devStartBound, out.String(), errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// keyFile writes a key file with keys (id, fill byte), the first encrypting.
func keyFile(t *testing.T, keys ...codec.Key) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k.ID + " " + base64.StdEncoding.EncodeToString(k.Secret) + "\n")
	}
	f := filepath.Join(t.TempDir(), "keys.txt")
	require.NoError(t, os.WriteFile(f, []byte(b.String()), 0o600))
	return f
}

// chromiumPath is Debian's Chromium (TULIP_CHROMIUM overrides). Under CI
// a missing browser fails the test; elsewhere it skips with how to get it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("TULIP_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no browser at %s: .ci/run installs Debian's chromium (scripts/install-test-deps)", p)
		}
		t.Skipf("no browser at %s: run scripts/install-test-deps (Debian's chromium) or set TULIP_CHROMIUM", p)
	}
	return p
}

// npmModules installs tests/ts's npm packages (package-lock.json) unless
// they are there.
func npmModules(t *testing.T, modules ...string) string {
	t.Helper()
	dir, err := filepath.Abs("ts")
	require.NoError(t, err)
	for _, m := range modules {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", m)); err == nil {
			continue
		}
		npm, err := exec.LookPath("npm")
		require.NoError(t, err, "npm is needed to install %s", m)
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci: %s", out)
		break
	}
	return dir
}

// TestWebUI drives Debian's headless Chromium against `tulip dev` with a
// codec key: the workflows list shows the agent run; its page shows the
// tool activities in the event history with their arguments decrypted
// through the codec server; the Queries tab answers tulip.log. The server
// meanwhile holds only ciphertext. Screenshots go to tests/artifacts/.
func TestWebUI(t *testing.T) {
	browser := chromiumPath(t)
	dir := npmModules(t, "playwright-core")
	node, err := exec.LookPath("node")
	require.NoError(t, err)

	keys := keyFile(t, codec.Key{ID: "ui-test-1", Secret: []byte(strings.Repeat("k", 32))})
	port, uiPort := freeTCPPort(t), freeTCPPort(t)
	addr, ui, codecURL := devUp(t, "--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(uiPort), "--codec-key-file", keys)
	require.Equal(t, "http://127.0.0.1:"+strconv.Itoa(uiPort)+"/namespaces/default/workflows", ui)
	require.NotEmpty(t, codecURL)

	c := encryptedClient(t, addr, keys, nil)
	thread := "ui-" + threadID(t)
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: cli.DevTaskQueue, Model: "demo", ThreadID: thread,
		Message: "Please refund order ord-4821 to Mme Tulipe"})
	require.NoError(t, err)
	require.Equal(t, "issue_refund", res.Trace[0].Tool)

	// The server stores ciphertext: its own history has no argument text.
	raw := payloadText(t, history(t, dial(t, addr), h.WorkflowID, h.RunID))
	require.NotContains(t, raw, "ord-4821")
	require.NotContains(t, raw, "Mme Tulipe")

	artifacts, err := filepath.Abs("artifacts")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(artifacts, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "ui.mjs"), browser, strings.TrimSuffix(ui, "/namespaces/default/workflows"), h.WorkflowID, h.RunID, artifacts)
	cmd.Dir = dir
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "ui.mjs: %s", stderr.String())
	var got struct {
		ListShowsRun    bool     `json:"list_shows_run"`
		Activities      []string `json:"activities"`
		DecodedArgument bool     `json:"decoded_argument"`
		DecodedMessage  bool     `json:"decoded_message"`
		QueryTypes      []string `json:"query_types"`
		LogQuery        string   `json:"log_query"`
		CurrentDetails  string   `json:"current_details"`
		ActivitySummary string   `json:"activity_summary"`
		RunSummary      string   `json:"run_summary"`
		Screenshots     []string `json:"screenshots"`
	}
	require.NoError(t, json.Unmarshal(stdout, &got), "%s\nstderr: %s", stdout, stderr.String())
	t.Logf("screenshots: %v", got.Screenshots)
	assert.True(t, got.ListShowsRun, "the workflows list shows the run")
	assert.Contains(t, got.Activities, "tulip.tool.issue_refund", "the event history shows the tool activities")
	assert.True(t, got.DecodedArgument, "the tool's argument is shown decrypted")
	assert.True(t, got.DecodedMessage, "the user message is shown decrypted")
	assert.Contains(t, got.QueryTypes, "tulip.log")
	assert.Contains(t, got.LogQuery, "ord-4821", "the tulip.log query result, decrypted")
	assert.Contains(t, got.LogQuery, `"origin"`)
	// User metadata: no events, shown by the UI, decrypted by the codec.
	t.Logf("current details: %s", got.CurrentDetails)
	assert.Contains(t, got.CurrentDetails, "served from the log")
	assert.Regexp(t, `served\s+from record 0 \(earlier_turn\)`, got.CurrentDetails, "the served refund, marked")
	assert.Regexp(t, `near miss\s+nearest: record 3, same arguments, tool not idempotent`, got.CurrentDetails, "the second mint, marked")
	assert.Contains(t, got.RunSummary, "tulip agent support · model demo · thread "+thread, "the run's summary")
	assert.Contains(t, got.ActivitySummary, "issue_refund · refund:ord-4821:120:v1", "a tool activity's summary: tool and key")
}

// freeTCPPort is a loopback port held for the server the test starts on
// it next (devserver.FreePort: no other bind or connection takes it first).
func freeTCPPort(t *testing.T) int {
	t.Helper()
	p, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	return p
}
