package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
)

// TestSoakShort runs `tulip soak` for about two minutes: 3 worker processes
// with a sticky cache of 2, runs over 4 threads for 40 s with a worker
// SIGKILLed every 4 s and one server restart, then the checker (every run
// against the same runs played alone, billing's keys, every history
// replayed). Nothing fires twice, nothing is stuck.
func TestSoakShort(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGKILL of worker processes: Linux only")
	}
	bin := filepath.Join(t.TempDir(), "tulip")
	build := exec.Command("go", "build", "-o", bin, "github.com/tulip-temporal/tulip/cmd/tulip")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cmd := exec.Command(bin, "soak", "--workers", "3", "--cache-size", "2", "--threads", "4", "--kill-every", "4s",
		"--server-restarts", "1", "--duration", "40s", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("soak: %s", strings.TrimSpace(stdout.String()))
	if err != nil {
		os.Stderr.Write(stderr.Bytes())
	}
	require.NoError(t, err)
	var sum cli.SoakSummary
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &sum), "one JSON line: %s", stdout.String())
	assert.Zero(t, sum.Duplicates)
	assert.Zero(t, sum.Stuck)
	assert.Zero(t, sum.Failed)
	assert.Empty(t, sum.Violations)
	assert.Equal(t, sum.Runs, sum.Completed)
	assert.Greater(t, sum.Runs, 8)
	assert.GreaterOrEqual(t, sum.Faults["worker_kill"], 5)
	assert.Equal(t, 1, sum.Faults["server_restart"])
	assert.Equal(t, 4, sum.DistinctKeys)
	assert.Equal(t, sum.DistinctKeys, sum.Refunds)
	assert.Equal(t, sum.Runs, sum.ReplayedHistories)
	assert.Greater(t, sum.BaselineTurnsPerS, 0.0)
}
