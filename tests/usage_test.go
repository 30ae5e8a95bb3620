package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// usageModel answers each run's message "N": N-1 responses that call the
// idempotent lookup (the same call each time: served after the first),
// then the answer. Response t of a run reports prompt 100*t, completion t
// and cached 10*t tokens. With stall set, the first attempt of a run's
// second response waits until its worker goes away (its usage is never
// reported).
type usageModel struct {
	mu      sync.Mutex
	stall   bool
	stalled chan struct{}
}

func (m *usageModel) respond(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
	var n int
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			fmt.Sscanf(msg.Content, "%d", &n)
		}
	}
	m.mu.Lock()
	stall := m.stall && req.Turn == 2
	if stall {
		m.stall = false
	}
	m.mu.Unlock()
	if stall {
		close(m.stalled)
		<-ctx.Done()
		return tulip.ModelResponse{}, ctx.Err()
	}
	u := &tulip.Usage{PromptTokens: 100 * req.Turn, CompletionTokens: req.Turn, CachedTokens: 10 * req.Turn}
	if req.Turn < n {
		return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("c%d", req.Turn), Name: "lookup", Arguments: `{"id":"x"}`}}, Usage: u}, nil
	}
	return tulip.ModelResponse{Text: "done", Usage: u}, nil
}

// want is the usage of a run of n responses.
func usageOf(n int) tulip.Usage {
	var u tulip.Usage
	for t := 1; t <= n; t++ {
		u.PromptTokens += 100 * t
		u.CompletionTokens += t
		u.CachedTokens += 10 * t
	}
	return u
}

func plus(a, b tulip.Usage) tulip.Usage {
	return tulip.Usage{PromptTokens: a.PromptTokens + b.PromptTokens, CompletionTokens: a.CompletionTokens + b.CompletionTokens,
		CachedTokens: a.CachedTokens + b.CachedTokens}
}

// A thread counts its tokens: each run's result has the run's (Usage) and
// the thread's through it (ThreadUsage), and the thread's state holds the
// thread's. A run that continues as new after every turn counts the same;
// a model call whose worker went away mid-call counts once, when it
// answered; and every history replays.
func TestThreadUsage(t *testing.T) {
	c := dial(t, server.Address())
	m := &usageModel{stalled: make(chan struct{})}
	tool := tulip.MustTool(tulip.ToolSpec{Name: "lookup", Idempotent: true},
		func(context.Context, struct {
			ID string `json:"id"`
		}) (string, error) {
			return "found", nil
		})
	opts := tulip.Options{Tools: []tulip.Toolset{tool}, Models: map[string]tulip.Model{"m": tulip.ModelFunc(m.respond), "m2": tulip.ModelFunc(m.respond)}}
	tq := taskQueue("usage")
	w := startPublicWorker(t, c, tq, opts)
	thread := threadID(t)
	dir := t.TempDir()
	var files []string
	written := map[string]bool{}
	// record writes the histories of the thread's newest chain.
	record := func() {
		for _, id := range chainRunIDs(t, c, thread) {
			if !written[id] {
				written[id] = true
				f := filepath.Join(dir, fmt.Sprintf("h%d.json", len(files)))
				writeHistory(t, c, runclient.Handle{WorkflowID: thread, RunID: id}, f)
				files = append(files, f)
			}
		}
	}
	play := func(model, msg string, continueAfter int) *agent.Result {
		run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: model, ThreadID: thread, Message: msg, ContinueAfterTurns: continueAfter})
		if err != nil {
			return &agent.Result{Error: err.Error()}
		}
		res, err := run.Await(ctxT(t))
		if err != nil {
			return &agent.Result{Error: err.Error()}
		}
		return res
	}

	first := play("m", "2", 0)
	require.Equal(t, agent.Completed, first.Status, "%+v", first)
	record()
	require.NotNil(t, first.Usage)
	assert.Equal(t, usageOf(2), *first.Usage)
	require.NotNil(t, first.ThreadUsage)
	assert.Equal(t, usageOf(2), *first.ThreadUsage)

	// Continuing as new after every turn: four runs in the chain.
	second := play("m2", "4", 1)
	require.Equal(t, agent.Completed, second.Status, "%+v", second)
	record()
	assert.Greater(t, second.ContinuedAsNew, 0)
	assert.Equal(t, usageOf(4), *second.Usage)
	assert.Equal(t, plus(usageOf(2), usageOf(4)), *second.ThreadUsage, "the thread's tokens: both runs'")

	// The worker goes away while the model answers the second response:
	// another worker answers it, and it counts once.
	m.mu.Lock()
	m.stall = true
	m.mu.Unlock()
	done := make(chan *agent.Result, 1)
	go func() { done <- play("m2", "3", 0) }()
	<-m.stalled
	w.Stop()
	startPublicWorker(t, c, tq, opts)
	var third *agent.Result
	select {
	case third = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not finish on the second worker")
	}
	require.Equal(t, agent.Completed, third.Status, "%+v", third)
	record()
	assert.Equal(t, usageOf(3), *third.Usage, "the lost attempt reported nothing; its retry counts once")
	total := plus(plus(usageOf(2), usageOf(4)), usageOf(3))
	assert.Equal(t, total, *third.ThreadUsage)

	st, err := agent.Thread(ctxT(t), c, thread)
	require.NoError(t, err)
	require.NotNil(t, st.Usage)
	assert.Equal(t, total, *st.Usage, "the thread's state counts them too")
	m1, m2 := usageOf(2), plus(usageOf(4), usageOf(3))
	assert.Equal(t, map[string]*tulip.Usage{"m": &m1, "m2": &m2}, st.UsageByModel, "and per model")

	prices := filepath.Join(t.TempDir(), "prices.json")
	require.NoError(t, os.WriteFile(prices, []byte(`{"m": {"prompt": 1000, "cached": 100, "completion": 5000}}`), 0o644))
	stdout, stderr, code := runCLI(t, "inspect", thread, "--address", server.Address(), "--prices", prices)
	require.Equal(t, 0, code, stderr)
	t.Log(stdout)
	// m: (300-30)*1000 + 30*100 + 3*5000 per million tokens = $0.2880.
	assert.Contains(t, stdout, "  model m: 300 prompt (30 cached), 3 completion, $0.2880")
	assert.Contains(t, stdout, "cost: $0.2880 (no price for m2)")
	_, stderr, code = runCLI(t, "inspect", thread, "--address", server.Address(), "--prices", thread)
	assert.Equal(t, 2, code, "a prices file that cannot be read is a usage error")
	assert.Contains(t, stderr, "--prices")
	assert.Contains(t, stdout, fmt.Sprintf("thread tokens (every run and agent): %d prompt (%d cached), %d completion",
		total.PromptTokens, total.CachedTokens, total.CompletionTokens))
	assert.Contains(t, stdout, "served from the log: 5 of 6 calls")

	// Replayed, every run of the thread keeps its history's commands.
	require.NoError(t, tulip.ReplayHistories(opts, tulip.ReplayOptions{}, files...))
	t.Logf("thread %s: %d runs, %+v", thread, len(files), total)
}
