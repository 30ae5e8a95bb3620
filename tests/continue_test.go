package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// chainScript refunds, mints, refunds again (served across turns), hits
// the approval hook (interrupt), and after the resume refunds once more (a
// resumed run matches nothing: executed, with the same downstream key).
func chainScript() scenario.Run {
	done := "done"
	return scenario.Run{Hooks: []string{"approve_isolate_host"}, Turns: []scenario.Turn{
		turn(call("c1", "issue_refund", refund)),
		turn(call("c2", "mint_case_id", "{}")),
		turn(call("c3", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`)),
		turn(call("c4", "mint_case_id", "{}")),
		turn(call("c5", "isolate_host", `{"host": "web-1"}`), call("c6", "page_oncall", `{"case_id": "k", "summary": "s"}`)),
	}, Resumes: []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{
		turn(call("c7", "mint_case_id", "{}")),
		turn(call("c8", "issue_refund", refund)),
		turn(call("c9", "page_oncall", `{"case_id": "k", "summary": "s"}`)),
		{Text: &done},
	}}}}
}

// playChain runs chainScript on a thread, continuing as new every
// `every` turns, resumes its interrupt, and returns the final result (its
// whole trace) and the toolbox. The run's workflow ID is its own, its
// input's thread_id is scope: two plays with one scope derive the same
// downstream keys (a key hashes its thread), so they compare whole.
func playChain(t *testing.T, every int, scope string) (*agentrun.RunResult, *demo.Toolbox, string) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"m": chainScript().Model()})
	id := threadID(t)
	run, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: id, TaskQueue: tq}, agentrun.WorkflowName,
		agentrun.RunInput{ThreadID: scope, Model: "m", Message: "go", Hooks: []string{"approve_isolate_host"}, ContinueAfterTurns: every})
	require.NoError(t, err)
	h := runclient.Handle{WorkflowID: id, RunID: run.GetRunID()}
	res, err := runclient.Await(ctxT(t), c, h, "")
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	out, err := runclient.Resume(ctxT(t), c, id, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
	require.NoError(t, err)
	assert.False(t, out.Duplicate)
	res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	res.Trace, err = runclient.Trace(ctxT(t), c, h, res)
	require.NoError(t, err)
	return res, tb, id
}

// A run that continues as new mid-thread behaves exactly as one run: the
// same outcomes, served-from records and downstream keys (every tool's,
// whole: a key of a tool that is not idempotent counts the executions
// before it, and the count crosses the boundary); no two executions of a
// tool that is not idempotent share a key; an interrupt and its resume
// work across the boundary; the next run on the thread serves the chain's
// records.
func TestContinueAsNewIsOneRun(t *testing.T) {
	scope := threadID(t)
	one, tbOne, _ := playChain(t, 0, scope)
	chain, tbChain, thread := playChain(t, 2, scope)
	assert.Equal(t, 0, one.ContinuedAsNew)
	assert.GreaterOrEqual(t, chain.ContinuedAsNew, 3)
	require.Len(t, chain.Trace, len(one.Trace))
	executed := map[string]string{}
	for i := range one.Trace {
		a, b := one.Trace[i], chain.Trace[i]
		assert.Equal(t, a.CallID, b.CallID)
		assert.Equal(t, a.Outcome, b.Outcome, a.CallID)
		assert.Equal(t, a.ServedFrom, b.ServedFrom, a.CallID)
		assert.Equal(t, a.Turn, b.Turn, a.CallID)
		assert.JSONEq(t, string(a.Result), string(b.Result), a.CallID)
		assert.Equal(t, a.Key, b.Key, "%s (%s): the whole downstream key", a.CallID, a.Tool)
		// A tool that is not idempotent makes something new each time:
		// no two of its executions may share a key (an idempotent tool's
		// identical calls do, by design: the service dedups them).
		if (b.Tool == "mint_case_id" || b.Tool == "lookup_order") && (b.Outcome == agentrun.OutcomeExecuted || b.Outcome == agentrun.OutcomeDangling) {
			if prev, dup := executed[b.Key]; dup {
				t.Errorf("%s and %s executed under one key %s", prev, b.CallID, b.Key)
			}
			executed[b.Key] = b.CallID
		}
	}
	assert.Equal(t, tbOne.Invocations(), tbChain.Invocations())
	outcomes := map[string]agentrun.Outcome{}
	for _, l := range chain.Trace {
		outcomes[l.CallID] = l.Outcome
	}
	assert.Equal(t, map[string]agentrun.Outcome{"c1": "executed", "c2": "executed", "c3": "cached", "c4": "executed",
		"c5": "dangling", "c6": "dangling", "c7": "executed", "c8": "executed", "c9": "executed"}, outcomes)
	assert.Equal(t, 2, tbChain.Invocations()["issue_refund"], "c1, and c8 after the resume (matching is off)")

	// 'tulip history' writes every run of the chain; each replays.
	out := filepath.Join(t.TempDir(), "chain.json")
	_, stderr, code := runCLI(t, "history", thread, "-o", out, "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	files, _ := filepath.Glob(strings.TrimSuffix(out, ".json") + "-*.json")
	require.Len(t, files, chain.ContinuedAsNew+1, stderr)
	stdout, stderr, code := runCLI(t, append([]string{"replay"}, files...)...)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, len(files), strings.Count(stdout, "ok   "))

	// The next run on the thread serves the chain's refund.
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	next := scenario.Run{Turns: []scenario.Turn{turn(call("d1", "issue_refund", refund))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"n": next.Model()})
	r, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: tq}, agentrun.WorkflowName,
		agentrun.RunInput{ThreadID: scope, Model: "n", Message: "again"})
	require.NoError(t, err)
	var res agentrun.RunResult
	require.NoError(t, r.Get(ctxT(t), &res))
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	require.NotNil(t, res.Trace[0].ServedFrom)
	assert.Equal(t, 0, *res.Trace[0].ServedFrom)

	// 'tulip history --all-runs' writes every run of the thread: the
	// chain's and the next run; each replays.
	all := filepath.Join(t.TempDir(), "thread.json")
	_, stderr, code = runCLI(t, "history", thread, "--all-runs", "-o", all, "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	files, _ = filepath.Glob(strings.TrimSuffix(all, ".json") + "-*.json")
	require.Len(t, files, chain.ContinuedAsNew+2, stderr)
	_, stderr, code = runCLI(t, append([]string{"replay"}, files...)...)
	require.Equal(t, 0, code, stderr)
}

// Without a blob store, a run whose state is larger than one payload still
// completes: its state goes by reference (the result names the runs that
// hold the content), and the thread's next run serves its calls. A single
// value too large for a payload (here a model response) fails the run
// before any of its calls runs, with tulip.PayloadTooLarge in one line; a
// tool result too large is that call's recorded error.
func TestLargeStateWithoutBlobStore(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	big := scenario.Run{}
	for i := range 15 {
		big.Turns = append(big.Turns, turn(call(fmt.Sprintf("b%d", i), "audit_append", fmt.Sprintf(`{"i": %d, "pad": "%s"}`, i, pad(100<<10)))))
	}
	next := scenario.Run{Turns: []scenario.Turn{turn(call("n1", "audit_append", big.Turns[3].ToolCalls[0].Arguments))}}
	huge := scenario.Run{Turns: []scenario.Turn{turn(
		call("h1", "issue_refund", refund),
		call("h2", "audit_append", fmt.Sprintf(`{"pad": "%s"}`, pad(1<<20))),
		call("h3", "audit_append", fmt.Sprintf(`{"pad": "%s", "more": 1}`, pad(1<<20))))}}
	models := map[string]activities.Model{"big": big.Model(), "next": next.Model(), "huge": huge.Model()}
	tq := scriptWorker(t, c, tb, models)
	thread := threadID(t)
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "big", ThreadID: thread, Message: "go"})
	require.NoError(t, err)
	assert.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, 15, tb.Invocations()["audit_append"])
	require.NotNil(t, res.State)
	require.NotNil(t, res.State.Conversation, "a 1.5 MB thread goes by reference")
	b, _ := json.Marshal(res)
	assert.Less(t, len(b), 64<<10, "the result names the content, it does not copy it (%d bytes)", len(b))

	_, res, err = runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "next", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	assert.Equal(t, 15, tb.Invocations()["audit_append"], "the earlier run's record served it")
	recs, err := runclient.ThreadLog(ctxT(t), c, thread, "")
	require.NoError(t, err)
	require.Len(t, recs, 16)
	assert.Contains(t, recs[3].Arguments, pad(100<<10), "the log reads back whole from the run that holds it")

	// A model response of 2 MB: the run fails before its calls run.
	h, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "huge", Message: "go"})
	var failed *runclient.RunFailedError
	require.ErrorAs(t, err, &failed)
	assert.Equal(t, protocol.ErrPayloadTooLarge, failed.Type())
	assert.Regexp(t, `^agent run failed \(tulip.PayloadTooLarge\): the model's response is 2\.0 MiB, over the 1\.9 MiB payload limit`, failed.Error())
	assert.NotContains(t, failed.Error(), "\n")
	assert.Equal(t, 0, tb.Invocations()["issue_refund"], "no call of that response ran")
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.True(t, app.NonRetryable())
	assert.Equal(t, 1, countEvents(history(t, c, h.WorkflowID, h.RunID), enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED), "the model was asked once")
}

func countEvents(h *historypb.History, typ enumspb.EventType) int {
	n := 0
	for _, e := range h.GetEvents() {
		if e.GetEventType() == typ {
			n++
		}
	}
	return n
}

func pad(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

// Storage settings in one place: the plugin given to a client with External
// Storage reaches that client's workers and lifts the payload limit, so a
// 2.5 MB tool result goes to the blob store instead of failing the call.
func TestPluginOnClientTakesItsStorage(t *testing.T) {
	big := activities.MustTool(protocol.ToolSpec{Name: "big_result", Idempotent: true},
		func(context.Context, struct{}) (string, error) { return pad(5 << 19), nil })
	run := scenario.Run{Turns: []scenario.Turn{turn(call("b1", "big_result", "{}"))}}
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: []*activities.Tool{big}, Models: map[string]activities.Model{"m": run.Model()}})
	require.NoError(t, err)
	blobs := &blobstore.Memory{}
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(),
		ExternalStorage: blobstore.ExternalStorage(blobs, 0), Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	defer c.Close()
	tq := taskQueue(t.Name())
	w := sdkworker.New(c, tq, sdkworker.Options{}) // the client's plugin
	require.NoError(t, w.Start())
	defer w.Stop()
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "go"})
	require.NoError(t, err)
	trace, err := runclient.Trace(ctxT(t), c, h, res)
	require.NoError(t, err)
	require.Equal(t, agentrun.OutcomeExecuted, trace[0].Outcome)
	assert.Nil(t, trace[0].Error, "no payload limit with the client's blob store")
	assert.Len(t, trace[0].Result, len(pad(5<<19))+2, "the whole result, read back")
	n, _ := blobs.Stats()
	assert.Greater(t, n, 0)
}
