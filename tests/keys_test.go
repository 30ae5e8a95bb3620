package tests

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// keyWitness is a tool that is not idempotent (mint, no arguments: every
// call of it has the same hash, only the count tells two apart) whose body
// notes the downstream key it received, per call id and attempt. With
// block set, a body notes its key and then waits for release.
type keyWitness struct {
	mu      sync.Mutex
	keys    map[string][]string // call id -> the key of each attempt
	order   []string
	block   bool
	release chan struct{}
}

func newKeyWitness() *keyWitness {
	return &keyWitness{keys: map[string][]string{}, release: make(chan struct{})}
}

func (w *keyWitness) tool() *activities.Tool {
	return activities.MustTool(protocol.ToolSpec{Name: "mint"},
		func(ctx context.Context, _ struct{}) (map[string]string, error) {
			key := activities.IdempotencyKey(ctx)
			in, _ := activities.CallInfo(ctx)
			id := in.CallID
			w.mu.Lock()
			if _, seen := w.keys[id]; !seen {
				w.order = append(w.order, id)
			}
			w.keys[id] = append(w.keys[id], key)
			block := w.block
			w.mu.Unlock()
			if block {
				select {
				case <-w.release:
				case <-ctx.Done():
				}
			}
			return map[string]string{"minted": key}, nil
		})
}

func (w *keyWitness) has(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.keys[id]) > 0
}

// A thread's runs never send one key for two executions of a tool that is
// not idempotent: runs whose held calls a resume performs (dangling: they
// count, no record holds them), each continuing as new after every turn,
// then a run terminated while a call executes (its record is left out of
// the state the next run loads), then one more run. Every key the tool's
// body ever received is collected at the body: each call's attempts share
// one key, and no two calls share one. Fails on the code before
// "tulip-key-counter": the next run counted from its log's length, and
// its first mints repeated the dangling calls' keys.
func TestKeysNeverRepeatOnAThread(t *testing.T) {
	c := dial(t, server.Address())
	w := newKeyWitness()
	mint := func(id string) threadstate.ToolCall { return call(id, "mint", "{}") }
	done := "done"
	// A run whose first response is held (hold_mint, installed by the
	// response itself) and performed, then mints twice more after the
	// hook is removed.
	held := func(a, b, c, d string) scenario.Run {
		return scenario.Run{Turns: []scenario.Turn{{InstallHooks: []string{"hold_mint"}, ToolCalls: []threadstate.ToolCall{mint(a), mint(b)}}},
			Resumes: []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{
				{RemoveHooks: []string{"hold_mint"}, ToolCalls: []threadstate.ToolCall{mint(c)}}, turn(mint(d)), {Text: &done}}}}}
	}
	models := map[string]activities.Model{
		"r1": held("c1", "c2", "c3", "c4").Model(),
		"r2": held("c5", "c6", "c7", "c8").Model(),
		"r3": scenario.Run{Turns: []scenario.Turn{turn(mint("c9"))}}.Model(),
		"r4": scenario.Run{Turns: []scenario.Turn{turn(mint("c10")), turn(mint("c11")), {Text: &done}}}.Model(),
	}
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{w.tool()}, Models: models,
		Hooks: map[string]hooks.Hook{"hold_mint": hooks.Approve("mint", "minting needs approval")}})
	thread := threadID(t)
	opts := func(model string) runclient.RunOptions {
		return runclient.RunOptions{TaskQueue: tq, Model: model, ThreadID: thread, Message: "mint", ContinueAfterTurns: 1}
	}

	for _, model := range []string{"r1", "r2"} {
		h, res, err := runclient.Run(ctxT(t), c, opts(model))
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusInterrupted, res.Status, model)
		_, err = runclient.Resume(ctxT(t), c, thread, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
		require.NoError(t, err)
		res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusCompleted, res.Status, model)
		assert.GreaterOrEqual(t, res.ContinuedAsNew, 2, "%s continued as new", model)
		res.Trace, err = runclient.Trace(ctxT(t), c, h, res)
		require.NoError(t, err)
		dangling := 0
		for _, l := range res.Trace {
			if l.Outcome == agentrun.OutcomeDangling {
				dangling++
			}
		}
		assert.Equal(t, 2, dangling, "%s performed its two held calls", model)
	}

	// r3 is terminated while its call executes.
	w.mu.Lock()
	w.block = true
	w.mu.Unlock()
	h, err := runclient.Start(ctxT(t), c, opts("r3"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.has("c9") }, time.Minute, 20*time.Millisecond)
	require.NoError(t, c.TerminateWorkflow(ctxT(t), h.WorkflowID, "", "stopped mid-call"))
	w.mu.Lock()
	w.block = false
	w.mu.Unlock()
	close(w.release)

	_, res, err := runclient.Run(ctxT(t), c, opts("r4"))
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)

	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11"}, sortedCalls(w.order), "every call's body ran")
	owner := map[string]string{}
	for _, id := range w.order {
		keys := w.keys[id]
		for _, k := range keys[1:] {
			assert.Equal(t, keys[0], k, "%s: its attempts share one key", id)
		}
		if prev, dup := owner[keys[0]]; dup {
			t.Errorf("%s and %s were sent one key, %s", prev, id, keys[0])
		}
		owner[keys[0]] = id
	}
}

// sortedCalls orders call ids c1, c2, ... c10 by number.
func sortedCalls(ids []string) []string {
	out := append([]string(nil), ids...)
	num := func(s string) int {
		n := 0
		for _, r := range s[1:] {
			n = n*10 + int(r-'0')
		}
		return n
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if num(out[j]) < num(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
