package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveLoadReport is what the test reads of tests/serveload's -json
// report.
type serveLoadReport struct {
	OK              bool     `json:"ok"`
	LostMessages    int      `json:"lost_messages"`
	WrongAnswers    int      `json:"wrong_answers"`
	RepeatedEffects int      `json:"repeated_effects"`
	TurnsAnswered   int      `json:"turns_answered"`
	TurnsSent       int      `json:"turns_sent"`
	WorkerKills     int      `json:"worker_kills"`
	ServeRestarts   int      `json:"serve_restarts"`
	ShutdownCuts    int      `json:"streams_cut_by_shutdown"`
	Resumes         int      `json:"stream_resumes"`
	LostSamples     []string `json:"lost_samples"`
	WrongSamples    []string `json:"wrong_samples"`
}

// runServeLoad runs the serveload binary with args and reads its report;
// it returns the exit code too.
func runServeLoad(t *testing.T, bin string, args ...string) (serveLoadReport, int, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "-json", out)...)
	text, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err, "%s", text)
	}
	b, err := os.ReadFile(out)
	require.NoError(t, err, "serveload wrote no report (exit %d): %s", code, text)
	var rep serveLoadReport
	require.NoError(t, json.Unmarshal(b, &rep))
	return rep, code, string(text)
}

// TestServeLoadShort is the short version of the load test of 'tulip
// serve' (tests/serveload; docs/serve.md, "Load test"): 20 conversations
// with the official OpenAI Go client for 40 s through a round-robin proxy
// in front of two serve processes, a worker process SIGKILLed and one
// serve instance restarted on the way. No message is lost, no answer is
// wrong, no refund is made twice at billing. Its control breaks the
// workers' dedup (the refund not idempotent, under a new billing key each
// time): the same checker must then find repeated refunds.
func TestServeLoadShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "serveload")
	build := exec.Command("go", "build", "-o", bin, "./serveload")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	t.Run("load", func(t *testing.T) {
		start := time.Now()
		rep, code, text := runServeLoad(t, bin, "-conversations", "20", "-duration", "30s", "-kill-every", "20s", "-restart-at", "0.5",
			"-turn-timeout", "60s", "-settle", "60s")
		t.Logf("%s(%s)", text, time.Since(start).Round(time.Second))
		assert.Equal(t, 0, code)
		assert.True(t, rep.OK)
		assert.Zero(t, rep.LostMessages, "lost: %v", rep.LostSamples)
		assert.Zero(t, rep.WrongAnswers, "wrong: %v", rep.WrongSamples)
		assert.Zero(t, rep.RepeatedEffects)
		assert.Greater(t, rep.TurnsAnswered, 40)
		assert.Equal(t, rep.TurnsSent, rep.TurnsAnswered)
		assert.Equal(t, 1, rep.WorkerKills)
		assert.Equal(t, 1, rep.ServeRestarts)
		assert.Positive(t, rep.ShutdownCuts, "streams the restart cut were read on elsewhere")
		assert.GreaterOrEqual(t, rep.Resumes, rep.ShutdownCuts)
	})

	t.Run("control: dedup broken", func(t *testing.T) {
		rep, code, text := runServeLoad(t, bin, "-break-dedup", "-conversations", "4", "-turns", "2", "-duration", "30s", "-kill-every", "0", "-restart-at", "0")
		t.Logf("%s", text)
		assert.Equal(t, 1, code, "the checker fails the run")
		assert.False(t, rep.OK)
		assert.Equal(t, 4, rep.RepeatedEffects, "each conversation's re-emitted refund is made again")
		assert.Equal(t, 4, rep.WrongAnswers, "each confirmation's refund was executed, not served from the log")
		assert.Zero(t, rep.LostMessages)
	})
}
