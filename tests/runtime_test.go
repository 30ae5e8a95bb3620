package tests

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

func call(id, tool, args string) threadstate.ToolCall {
	return threadstate.ToolCall{ID: id, Name: tool, Arguments: args}
}

func turn(calls ...threadstate.ToolCall) scenario.Turn { return scenario.Turn{ToolCalls: calls} }

const refund = `{"order_id": "ord-4821", "amount": 120.0}`

// runScript runs one scripted run on a fresh worker and returns the handle
// and result.
func runScript(t *testing.T, c client.Client, tb *demo.Toolbox, run scenario.Run, opts runclient.RunOptions) (runclient.Handle, *agentrun.RunResult) {
	t.Helper()
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"script": run.Model()}})
	opts.TaskQueue, opts.Model = tq, "script"
	h, res, err := runclient.Run(ctxT(t), c, opts)
	require.NoError(t, err)
	return h, res
}

// A served call adds no history event: a run with a duplicate call (served)
// has exactly the event sequence of the same run without it, while a call
// that executes adds its activity's events.
func TestServedCallAddsNoHistoryEvent(t *testing.T) {
	c := dial(t, server.Address())
	scripts := map[string]scenario.Run{
		"without": {Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund)), turn(call("c3", "mint_case_id", "{}"))}},
		"served": {Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund), call("c2", "issue_refund", `{"amount": 120.0, "order_id": "ord-4821"}`)),
			turn(call("c4", "issue_refund", `{"order_id": "ord-4821", "amount": 120}`), call("c3", "mint_case_id", "{}"))}},
		"executed": {Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund), call("c2", "issue_refund", `{"order_id": "ord-4822", "amount": 120.0}`)),
			turn(call("c3", "mint_case_id", "{}"))}},
	}
	types := map[string][]string{}
	for name, run := range scripts {
		tb := demo.NewToolbox()
		h, res := runScript(t, c, tb, run, runclient.RunOptions{})
		require.Equal(t, agentrun.StatusCompleted, res.Status)
		types[name] = eventTypes(history(t, c, h.WorkflowID, h.RunID))
		t.Logf("%s: %d events, issue_refund ran %d times", name, len(types[name]), tb.Invocations()["issue_refund"])
	}
	assert.Equal(t, types["without"], types["served"], "two served calls add no event")
	count := func(name, typ string) int {
		n := 0
		for _, e := range types[name] {
			if e == typ {
				n++
			}
		}
		return n
	}
	for _, typ := range []string{enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED.String(),
		enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED.String(), enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED.String()} {
		assert.Equal(t, count("without", typ)+1, count("executed", typ), "an executed call adds its activity's %s", typ)
	}
}

// A worker stopped mid-run and replaced by a new one (new client, new
// toolbox, empty cache) finishes the run: no body executes twice, and a
// duplicate after the switch is still served from the log rebuilt from
// history.
func TestWorkerReplacedMidRun(t *testing.T) {
	tq := taskQueue(t.Name())
	run := scenario.Run{Turns: []scenario.Turn{
		turn(call("c1", "issue_refund", refund)),
		turn(call("c2", "page_oncall", `{"case_id": "k", "summary": "s"}`)),
		turn(call("c3", "issue_refund", refund), call("c4", "page_oncall", `{"summary": "s", "case_id": "k"}`)),
	}}
	script := run.Model()
	reached := make(chan struct{})
	release := make(chan struct{})
	// Worker 1's model blocks at turn 3, until the test has stopped it.
	blocking := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if req.Turn == 3 {
			close(reached)
			<-release
			return activities.ModelResponse{}, errors.New("worker 1 is gone")
		}
		return script.Respond(ctx, req)
	})
	tb1, tb2 := demo.NewToolbox(), demo.NewToolbox()
	c1 := dial(t, server.Address())
	plugin1 := workerplugin.Options{Tools: tb1.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"m": blocking}}
	w1 := startWorker(t, c1, tq, plugin1)
	h, err := runclient.Start(ctxT(t), c1, runclient.RunOptions{TaskQueue: tq, Model: "m"})
	require.NoError(t, err)
	<-reached
	go func() { time.Sleep(200 * time.Millisecond); close(release) }()
	w1.Stop()

	c2 := dial(t, server.Address())
	startWorker(t, c2, tq, workerplugin.Options{Tools: tb2.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"m": script}})
	res, err := runclient.Await(ctxT(t), c2, h, "")
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	got := map[string]agentrun.Outcome{}
	for _, l := range res.Trace {
		got[l.CallID] = l.Outcome
	}
	assert.Equal(t, map[string]agentrun.Outcome{"c1": "executed", "c2": "executed", "c3": "cached", "c4": "cached"}, got)
	inv1, inv2 := tb1.Invocations(), tb2.Invocations()
	assert.Equal(t, 1, inv1["issue_refund"]+inv2["issue_refund"], "no body ran twice")
	assert.Equal(t, 1, inv1["page_oncall"]+inv2["page_oncall"])
	assert.Equal(t, 0, inv2["issue_refund"]+inv2["page_oncall"], "worker 2 served both from the rebuilt log")
}

// A thread's checkpoint survives a restart of a server that keeps its state
// in a file.
func TestCheckpointSurvivesServerRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tulip.db")
	tb := demo.NewToolbox()
	thread := "restart-" + taskQueue("t")
	for i, want := range []agentrun.Outcome{agentrun.OutcomeExecuted, agentrun.OutcomeCached} {
		srv, err := devserver.Start(devserver.Options{DBFile: db})
		require.NoError(t, err)
		c := dial(t, srv.Address())
		run := scenario.Run{Turns: []scenario.Turn{turn(call("c", "issue_refund", refund))}}
		_, res := runScript(t, c, tb, run, runclient.RunOptions{ThreadID: thread})
		require.Equal(t, want, res.Trace[0].Outcome, "run %d", i+1)
		c.Close()
		srv.Stop()
	}
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
}

// One open run per thread: a second run gets a typed error, not a hang.
// A resume of a closed run, and a resume with nothing to resume, fail
// clearly; the interrupted run then resumes and completes.
func TestThreadBusyAndResumeErrors(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	run := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "isolate_host", `{"host": "web-1"}`))}}
	tb := demo.NewToolbox()
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"m": run.Model()}})
	thread := "busy-" + tq
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", ThreadID: thread, Hooks: []string{"approve_isolate_host"}})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	require.Len(t, res.Interrupt.Held, 1)

	_, err = runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", ThreadID: thread})
	var busy *runclient.ThreadBusyError
	require.ErrorAs(t, err, &busy)
	assert.Equal(t, thread, busy.ThreadID)

	_, err = runclient.Resume(ctxT(t), c, thread, agentrun.ResumeInput{InterruptID: "int-9", Answer: "x"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, protocol.ErrStaleInterrupt, appErr.Type())

	out, err := runclient.Resume(ctxT(t), c, thread, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
	require.NoError(t, err)
	assert.False(t, out.Duplicate)
	again, err := runclient.Resume(ctxT(t), c, thread, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
	require.NoError(t, err)
	assert.True(t, again.Duplicate, "delivered twice, takes effect once")
	final, err := runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
	require.NoError(t, err)
	assert.Equal(t, agentrun.StatusCompleted, final.Status)
	assert.Equal(t, 1, tb.Invocations()["isolate_host"])

	_, err = runclient.Resume(ctxT(t), c, thread, agentrun.ResumeInput{Answer: "late"})
	var nie *runclient.NotInterruptedError
	assert.ErrorAs(t, err, &nie)
}

// A run that closed without a checkpoint (terminated) is stepped over: the
// next run on the thread still sees the records of the run before it.
func TestThreadSurvivesTerminatedRun(t *testing.T) {
	c := dial(t, server.Address())
	thread := "terminated-" + taskQueue("t")
	tb := demo.NewToolbox()
	_, res := runScript(t, c, tb, scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}, runclient.RunOptions{ThreadID: thread})
	require.Equal(t, agentrun.OutcomeExecuted, res.Trace[0].Outcome)

	h, res := runScript(t, c, tb, scenario.Run{Turns: []scenario.Turn{turn(call("c2", "isolate_host", `{"host": "h"}`))}},
		runclient.RunOptions{ThreadID: thread, Hooks: []string{"approve_isolate_host"}})
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	require.NoError(t, c.TerminateWorkflow(ctxT(t), h.WorkflowID, h.RunID, "test"))

	_, res = runScript(t, c, tb, scenario.Run{Turns: []scenario.Turn{turn(call("c3", "issue_refund", refund))}}, runclient.RunOptions{ThreadID: thread})
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])

	recs, err := runclient.ThreadLog(ctxT(t), c, thread, "")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "executed", string(recs[0].Origin))
	assert.Equal(t, "cached", string(recs[1].Origin))
}

// The calls of one response run at once: three bodies that each wait until
// three are running all meet. With SequentialCalls they run one by one,
// and none sees another.
func TestCallsOfAResponseRunAtOnce(t *testing.T) {
	c := dial(t, server.Address())
	for _, sequential := range []bool{false, true} {
		var mu sync.Mutex
		running, ran, met := 0, 0, false
		meet := activities.MustTool(protocol.ToolSpec{Name: "meet", Idempotent: true},
			func(ctx context.Context, a struct {
				N int `json:"n"`
			}) (string, error) {
				mu.Lock()
				running++
				ran++
				met = met || running >= 3
				mu.Unlock()
				defer func() { mu.Lock(); running--; mu.Unlock() }()
				deadline := time.Now().Add(5 * time.Second)
				if sequential {
					deadline = time.Now().Add(300 * time.Millisecond)
				}
				for time.Now().Before(deadline) {
					mu.Lock()
					ok := met
					mu.Unlock()
					if ok {
						return "together", nil
					}
					time.Sleep(10 * time.Millisecond)
				}
				return "alone", nil
			})
		run := scenario.Run{Turns: []scenario.Turn{turn(call("a", "meet", `{"n": 1}`), call("b", "meet", `{"n": 2}`),
			call("c", "meet", `{"n": 3}`), call("d", "meet", `{"n": 1}`))}}
		tq := taskQueue(t.Name())
		startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{meet}, Models: map[string]activities.Model{"m": run.Model()}})
		_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", SequentialCalls: sequential})
		require.NoError(t, err)
		require.Len(t, res.Trace, 4)
		want := `"together"`
		if sequential {
			want = `"alone"`
		}
		for _, l := range res.Trace[:3] {
			assert.Equal(t, want, string(l.Result), "sequential=%v call %s", sequential, l.CallID)
		}
		assert.Equal(t, agentrun.OutcomeCached, res.Trace[3].Outcome, "d is a's twin in the same response")
		assert.Equal(t, string(res.Trace[0].Result), string(res.Trace[3].Result))
		assert.Equal(t, 3, ran, "three bodies ran")
	}
}

// The embedded server applies the dynamic config it is given (the same
// way it applies its tuned defaults): with continue-as-new suggested after
// 20 history events, a run of a few turns follows the suggestion; on the
// shared server (Temporal's default, 4,096 events) the same run does not.
func TestDevserverAppliesDynamicConfig(t *testing.T) {
	srv, err := devserver.Start(devserver.Options{DynamicConfig: map[string]any{"limit.historyCount.suggestContinueAsNew": 20}})
	require.NoError(t, err)
	defer srv.Stop()
	run := scenario.Run{}
	for i := range 6 {
		run.Turns = append(run.Turns, turn(call(fmt.Sprintf("c%d", i), "mint_case_id", "{}")))
	}
	continued := map[string]int{}
	for name, s := range map[string]*devserver.Server{"suggest at 20": srv, "default": server} {
		c := dial(t, s.Address())
		tb := demo.NewToolbox()
		_, res := runScript(t, c, tb, run, runclient.RunOptions{})
		require.Equal(t, agentrun.StatusCompleted, res.Status, name)
		require.Len(t, res.Trace, 6, name)
		continued[name] = res.ContinuedAsNew
	}
	assert.GreaterOrEqual(t, continued["suggest at 20"], 1)
	assert.Equal(t, 0, continued["default"])
}
