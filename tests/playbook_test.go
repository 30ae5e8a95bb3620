package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
)

// playbookBlocks are the sh blocks of docs/deploy.md's upgrade playbook,
// each a list of command lines (comments left out).
func playbookBlocks(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "## Upgrading workers: the playbook")
	require.GreaterOrEqual(t, start, 0)
	end := strings.Index(doc[start:], "**What a change does")
	require.Greater(t, end, 0)
	var blocks [][]string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc[start:start+end], -1) {
		var lines []string
		for _, l := range strings.Split(m[1], "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
	}
	return blocks
}

// docs/deploy.md's upgrade playbook, run as written: the lines of its sh
// blocks, in order, through the tulip command line (its ports, deployment,
// task queue and directory swapped for the test's own; $MODEL_URL a
// scripted model). Between the steps, a request to the API shows which
// build took the thread's run: the old build while it is current, the new
// one after the roll out, the old one again after the roll back; the gate
// replays the recent runs it fetched.
func TestDeployPlaybook(t *testing.T) {
	blocks := playbookBlocks(t)
	require.Len(t, blocks, 4, "version, gate, roll out, roll back")
	m := newServeModel(t, 0)
	oldAddr, newAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t)), fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	deployment := fmt.Sprintf("playbook-%d", time.Now().UnixNano())
	tq := taskQueue("playbook")
	recent := filepath.Join(t.TempDir(), "recent") + "/"
	swap := strings.NewReplacer("127.0.0.1:8080", oldAddr, "127.0.0.1:8081", newAddr, "support-agent", deployment,
		"--task-queue support", "--task-queue "+tq, "TaskQueue = 'support'", "TaskQueue = '"+tq+"'", "recent/", recent)
	env := map[string]string{"TEMPORAL_ADDRESS": server.Address(), "MODEL_URL": m.URL + "/v1", "MODEL": "scripted"}

	run := func(line string) {
		t.Helper()
		words, err := shellWords(os.Expand(swap.Replace(line), func(k string) string { return env[k] }))
		require.NoError(t, err, line)
		require.Equal(t, "tulip", words[0], line)
		if words[len(words)-1] == "&" {
			ctx, cancel := context.WithCancel(context.Background())
			var out, errb lockedBuffer
			done := make(chan int, 1)
			go func() { done <- cli.Main(ctx, words[1:len(words)-1], &out, &errb) }()
			t.Cleanup(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
				}
			})
			require.Eventually(t, func() bool { return serveURLRE.MatchString(out.String()) }, 90*time.Second, 50*time.Millisecond,
				"%s: %s %s", line, out.String(), errb.String())
			return
		}
		stdout, stderr, code := runCLI(t, words[1:]...)
		require.Equal(t, 0, code, "%s\n%s%s", line, stdout, stderr)
		t.Logf("%s\n%s", line, strings.TrimSpace(stdout))
	}
	// buildOf sends a request through the API at addr and returns the
	// build its run ran on.
	buildOf := func(addr string) string {
		t.Helper()
		return requestVersioning(t, "http://"+addr).GetDeploymentVersion().GetBuildId()
	}

	for _, l := range blocks[0] { // version
		run(l)
	}
	assert.Equal(t, "2026-11-30.1", buildOf(newAddr), "the current build takes new runs, whichever API instance starts them")
	for _, l := range blocks[1] { // gate
		run(l)
	}
	files, err := filepath.Glob(recent + "*.json")
	require.NoError(t, err)
	assert.NotEmpty(t, files, "the gate fetched the recent runs")
	for _, l := range blocks[2] { // roll out
		run(l)
	}
	assert.Equal(t, "2026-12-07.1", buildOf(oldAddr), "after the roll out")
	for _, l := range blocks[3] { // roll back
		run(l)
	}
	assert.Equal(t, "2026-11-30.1", buildOf(newAddr), "after the roll back")
}
