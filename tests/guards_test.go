package tests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// A run is terminated while one of its calls is in flight (the export's
// body started and has not returned), after the refund of the same
// response settled. Nothing the run recorded is lost: the thread's next
// run is served the refund (billing asked once), and the model sees the
// refund's result and, for the export, a result that says it did not
// complete. (The older test terminated only after every call settled.)
func TestTerminatedMidCallKeepsItsRecords(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	started := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})
	defer close(release)
	export, err := activities.NewTool(protocol.ToolSpec{Name: "slow_export", Description: "exports the case"},
		func(ctx context.Context, _ struct{}) (string, error) {
			once.Do(func() { close(started) })
			select {
			case <-release:
			case <-ctx.Done():
			}
			return "", ctx.Err()
		})
	require.NoError(t, err)
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund), call("c2", "slow_export", "{}"))}}
	again := &seenModel{next: scenario.Run{Turns: []scenario.Turn{turn(call("c3", "issue_refund", refund))}}.Model()}
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: append(tb.Tools(), export), Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"first": first.Model(), "again": again}})
	thread := threadID(t)
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: "refund and export"})
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the export never started")
	}
	require.Eventually(t, func() bool {
		st, err := runclient.State(ctxT(t), c, h)
		return err == nil && len(st.Trace) >= 1 && st.Trace[0].Outcome == agentrun.OutcomeExecuted
	}, time.Minute, 50*time.Millisecond, "the refund settles while the export runs")
	require.NoError(t, c.TerminateWorkflow(ctxT(t), h.WorkflowID, h.RunID, "operator stopped it"))

	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "again", ThreadID: thread, Message: "did it go through?"})
	require.NoError(t, err)
	require.Len(t, res.Trace, 1)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome, "the terminated run's refund is served")
	assert.Equal(t, 1, refundsAsked(bill), "billing was asked for one refund")
	seen := again.first()
	require.Len(t, seen, 5, "user, assistant (two calls), refund result, export result, user")
	assert.Contains(t, seen[2].Content+seen[3].Content, "refund_id")
	assert.Contains(t, seen[2].Content+seen[3].Content, "not completed")
}

// What the model sees of messages another run holds (state by reference):
// a thread's first run holds a 300 KB message and a refund whose result is
// over the inline limit; its second run's model call runs on a new worker,
// whose cache holds nothing, so the conversation is paged from the first
// run. The model sees exactly the first run's message and result, and the
// served refund's result (a message that refers to the first one's
// content) in full.
func TestModelSeesMessagesHeldByAnotherRun(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	order := "ord-" + strings.Repeat("7", 600) // the refund's result is over the 512-byte inline limit
	args := `{"order_id": "` + order + `", "amount": 120.0}`
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", args))}}
	again := &seenModel{next: scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", args))}}.Model()}
	opts := workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"first": first.Model(), "again": again}}
	tq := taskQueue(t.Name())
	w1 := startWorker(t, c, tq, opts)
	thread := threadID(t)
	message := "please refund " + order + " " + strings.Repeat("abcdefghij", 30<<10)
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: message})
	require.NoError(t, err)
	result := string(res.Trace[0].Result)
	require.Greater(t, len(result), 512)
	w1.Stop()
	startWorker(t, c, tq, opts) // a new worker: its cache holds nothing

	_, res, err = runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "again", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	require.NotNil(t, res.State)
	require.NotNil(t, res.State.Conversation, "the state goes by reference")
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	again.mu.Lock()
	defer again.mu.Unlock()
	require.Len(t, again.seen, 2)
	seen := again.seen[0]
	require.Len(t, seen, 5)
	assert.True(t, seen[0].Content == message, "the first run's message, whole")
	assert.JSONEq(t, result, seen[2].Content, "the first run's refund result, whole")
	served := again.seen[1]
	require.Len(t, served, 7)
	assert.JSONEq(t, result, served[6].Content, "the served refund's result, whole")
	assert.Equal(t, "c2", served[6].ToolCallID)
}

// A worker that registers the agent-run workflow without tulip's
// interceptor (the internal Register, without the plugin) would run every
// call without dedup. The run fails at once with tulip.PluginMissing,
// before any call: billing is never asked. Control: the same scenario on a
// worker with the plugin refunds once and serves the repeat.
func TestPluginMissingFailsTheRun(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	twice := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund)), turn(call("c2", "issue_refund", refund))}}
	opts := workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"m": twice.Model()}}

	tq := taskQueue(t.Name())
	w := sdkworker.New(c, tq, sdkworker.Options{})
	require.NoError(t, workerplugin.Register(w, opts))
	require.NoError(t, w.Start())
	start := time.Now()
	_, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m"})
	w.Stop()
	require.Error(t, err)
	assert.True(t, tulip.Is(err, tulip.PluginMissing), "kind %q: %v", tulip.KindOf(err), err)
	assert.Less(t, time.Since(start), 30*time.Second, "fails fast, not a task retried")
	assert.Equal(t, 0, refundsAsked(bill), "no call ran without dedup")

	tq = taskQueue(t.Name() + "-control")
	startWorker(t, c, tq, opts)
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m"})
	require.NoError(t, err)
	require.Len(t, res.Trace, 2)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[1].Outcome)
	assert.Equal(t, 1, refundsAsked(bill))
}
