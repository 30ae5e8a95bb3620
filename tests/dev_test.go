package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `tulip dev` stays up and prints its address; other clients (here `tulip
// run` and `tulip inspect`) use it; it stops cleanly when interrupted.
func TestCLIDev(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- cli.Main(ctx, []string{"dev", "--port", "0"}, &out, &errb) }()
	waitForBanner(t, &out, &errb, done)
	addr := regexp.MustCompile(`--address (\S+)`).FindStringSubmatch(out.String())[1]

	f := writeFile(t, "s.json", `{"runs": [{"thread_id": "t-dev", "turns": [{"tool_calls": [{"id": "c1", "name": "mint_case_id", "arguments": "{}"}]}]}]}`)
	stdout, stderr, code := runCLI(t, "run", "--scenario", f, "--json", "--address", addr)
	require.Equal(t, 0, code, stderr)
	lines, sum := parseTrace(t, stdout)
	require.Len(t, lines, 1)
	assert.Equal(t, "executed", string(lines[0].Outcome))
	thread := sum.Runs[0].WorkflowID
	stdout, stderr, code = runCLI(t, "inspect", thread, "--address", addr)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "1 records")

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
	// Quiet by default: the server's logs are warnings and errors only, as
	// printable text; the banner stands out on stdout.
	// (How many warnings a stop prints varies with the machine's load:
	// the bound is loose, the level is not.)
	logs := strings.Split(strings.TrimSpace(errb.String()), "\n")
	assert.LessOrEqual(t, len(logs), 30, "stderr:\n%s", errb.String())
	for _, l := range logs {
		assert.False(t, strings.Contains(l, " INFO ") || strings.Contains(l, " DEBUG "), "only warnings and errors: %q", l)
		for _, r := range l {
			require.True(t, r == '\t' || unicode.IsPrint(r), "non-printable byte in %q", l)
		}
	}
	assert.Contains(t, out.String(), "Temporal server: ")
}

// A taken port is one line and exit 1, no panic, no stack.
func TestCLIDevPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	stdout, stderr, code := runCLI(t, "dev", "--port", strconv.Itoa(port))
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, fmt.Sprintf("tulip: devserver: port already in use: 127.0.0.1:%d (choose another with --port, or 0 for a free one)\n", port), stderr)

	// The Web UI's port too, checked before anything starts (the UI
	// server would exit the process).
	stdout, stderr, code = runCLI(t, "dev", "--port", "0", "--ui-port", strconv.Itoa(port))
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, fmt.Sprintf("tulip: devserver: port already in use: 127.0.0.1:%d (choose another with --ui-port, or --headless)\n", port), stderr)
	// Its default is the frontend port + 1000.
	ui, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ui.Close()
	uiPort := ui.Addr().(*net.TCPAddr).Port
	if uiPort > 1000 {
		stdout, stderr, code = runCLI(t, "dev", "--port", strconv.Itoa(uiPort-1000))
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, fmt.Sprintf("127.0.0.1:%d (choose another with --ui-port", uiPort))
	}
}

// A bad key file is one line naming the file and line, before anything
// starts.
func TestCLIBadKeyFile(t *testing.T) {
	f := writeFile(t, "keys.txt", "# keys\nk1 not-base64!\n")
	for _, args := range [][]string{
		{"dev", "--port", "0", "--codec-key-file", f},
		{"demo", "--codec-key-file", f},
		{"inspect", "t", "--address", server.Address(), "--codec-key-file", f},
		{"replay", "x.json", "--codec-key-file", f},
		{"codec-server", "--codec-key-file", f},
	} {
		stdout, stderr, code := runCLI(t, args...)
		assert.Equal(t, 1, code, "%v", args)
		assert.Empty(t, stdout)
		assert.Equal(t, "tulip: codec key file "+f+", line 2: key \"k1\" is not base64\n", stderr, "%v", args)
	}
	t.Setenv("TULIP_CODEC_KEY_FILE", f)
	_, stderr, code := runCLI(t, "inspect", "t", "--address", server.Address())
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "line 2")
}

// Every command's -h and --help print its flags on stdout, exit 0.
func TestCLIHelp(t *testing.T) {
	for _, cmd := range []string{"demo", "dev", "run", "chat", "inspect", "history", "replay", "resume", "codec-server", "keygen"} {
		for _, flag := range []string{"-h", "--help"} {
			stdout, stderr, code := runCLI(t, cmd, flag)
			assert.Equal(t, 0, code, "%s %s: %s", cmd, flag, stderr)
			assert.Empty(t, stderr)
			assert.True(t, strings.HasPrefix(stdout, "usage: tulip "+cmd), "%s %s: %q", cmd, flag, stdout)
			assert.Contains(t, stdout, "flags:")
		}
	}
	stdout, _, code := runCLI(t, "help")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "--help")
}

// `tulip dev --metrics-port` serves Prometheus /metrics for its demo
// worker: after a run on it, tulip's decision counters (and the SDK's own
// metrics) are there.
func TestCLIDevMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- cli.Main(ctx, []string{"dev", "--port", "0", "--metrics-port", "0"}, &out, &errb) }()
	waitForBanner(t, &out, &errb, done)
	addr := regexp.MustCompile(`--address (\S+)`).FindStringSubmatch(out.String())[1]
	url := regexp.MustCompile(`metrics \(Prometheus\): (\S+)`).FindStringSubmatch(out.String())[1]

	c := dial(t, addr)
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: cli.DevTaskQueue, Model: "demo", Message: "refund"})
	require.NoError(t, err)
	served := 0
	for _, l := range res.Trace {
		if l.Outcome == agentrun.OutcomeCached {
			served++
		}
	}
	require.Greater(t, served, 0)

	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	text := string(body)
	assert.Regexp(t, `tulip_tool_calls_total\{.*outcome="cached".*tool="issue_refund".*\} 1`, text)
	assert.Regexp(t, `(?m)^tulip_served_calls_total\{[^}]*relation="same_response"[^}]*tool="page_oncall"[^}]*\} 1$`, text)
	assert.Regexp(t, `(?m)^tulip_tool_calls_total\{[^}]*outcome="executed"[^}]*tool="mint_case_id"[^}]*\} 2$`, text)
	assert.Contains(t, text, "tulip_tool_latency_seconds_bucket")
	assert.Contains(t, text, "temporal_", "the SDK's own metrics")

	// An interrupt and its resume, and a run that continues as new: every
	// tulip metric, by the name the exporter gives it (the README's table),
	// and no tag with an empty value.
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: cli.DevTaskQueue, Model: "support", Message: "isolate web-1",
		Hooks: []string{"approve_isolate_host"}})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "ok", PerformDangling: true})
	require.NoError(t, err)
	_, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
	require.NoError(t, err)
	_, res, err = runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: cli.DevTaskQueue, Model: "demo", Message: "refund", ContinueAfterTurns: 2})
	require.NoError(t, err)
	require.Greater(t, res.ContinuedAsNew, 0)
	resp, err = http.Get(url)
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	text = string(body)
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(tulip_[a-z_]+)\{`).FindAllStringSubmatch(text, -1) {
		names[m[1]] = true
	}
	for _, want := range []string{"tulip_tool_calls_total", "tulip_served_calls_total", "tulip_tool_latency_seconds_bucket",
		"tulip_model_latency_seconds_bucket", "tulip_model_turn_latency_seconds_bucket", "tulip_interrupts_opened_total",
		"tulip_interrupts_resumed_total", "tulip_continued_as_new_total", "tulip_state_bytes", "tulip_near_misses_total"} {
		assert.True(t, names[want], "%s in %v", want, names)
	}
	assert.NotRegexp(t, `(?m)^tulip_[^{]*\{[^}]*=""`, text, "no empty tag values")
	cancel()
	<-done
}
