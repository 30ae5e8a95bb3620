package tests

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/demo"
	"github.com/tulip-temporal/tulip/scenario"
	tworker "github.com/tulip-temporal/tulip/worker"
	"github.com/tulip-temporal/tulip/workflow"
)

// laggingVisibility lists a workflow ID's runs as a visibility store that
// lags by lag would: a run that closed less than lag ago is not listed at
// all (its close, and with a short run its start too, not indexed yet).
func laggingVisibility(lag time.Duration) func(context.Context, client.Client, string) ([]activities.RunInfo, error) {
	return func(ctx context.Context, c client.Client, workflowID string) ([]activities.RunInfo, error) {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `WorkflowId = "` + workflowID + `"`})
		if err != nil {
			return nil, err
		}
		var out []activities.RunInfo
		for _, e := range resp.GetExecutions() {
			d, err := c.DescribeWorkflowExecution(ctx, workflowID, e.GetExecution().GetRunId())
			if err != nil {
				return nil, err
			}
			if ct := d.GetWorkflowExecutionInfo().GetCloseTime(); ct != nil && time.Since(ct.AsTime()) < lag {
				continue // closed too recently to be indexed
			}
			out = append(out, activities.RunInfo{RunID: e.GetExecution().GetRunId(), Start: e.GetStartTime().AsTime()})
		}
		return out, nil
	}
}

// A plain start (no previous_run_id) right after the thread's previous run
// closed, against a visibility store that does not list that run yet: the
// run waits out the configured lag and loads the newest state (the refund
// is served). The control, with no wait, loads the older state and the
// refund runs again: the lagging store is real, and the wait is what
// guards against it.
func TestPlainStartBehindLaggingVisibility(t *testing.T) {
	const lag = 3 * time.Second
	for _, tc := range []struct {
		name     string
		wait     time.Duration
		refunds  int
		outcome2 workflow.Outcome
	}{
		{"waits out the lag", lag + 500*time.Millisecond, 1, workflow.OutcomeCached},
		{"control: no wait", -1, 2, workflow.OutcomeExecuted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, server.Address())
			tb := demo.NewToolbox()
			tq := taskQueue(t.Name())
			refundRun := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
			again := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`))}}
			hello := scenario.Run{}
			startWorker(t, c, tq, tworker.Options{Tools: tb.Tools(), Hooks: demo.Hooks(),
				Models:       map[string]activities.Model{"hello": hello.Model(), "first": refundRun.Model(), "again": again.Model()},
				Checkpointer: activities.TemporalCheckpointer{List: laggingVisibility(lag), VisibilityLag: tc.wait}})
			thread := threadID(t)
			run := func(model string) workflow.RunResult {
				r, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: tq}, workflow.WorkflowName,
					map[string]any{"thread_id": thread, "model": model, "message": "hi"})
				require.NoError(t, err)
				var out workflow.RunResult
				require.NoError(t, r.Get(ctxT(t), &out))
				return out
			}
			run("hello") // an older run, long closed when the last one starts: no refund in it
			time.Sleep(lag + 500*time.Millisecond)
			out := run("first") // the refund executes
			require.Equal(t, workflow.OutcomeExecuted, out.Trace[0].Outcome)

			begin := time.Now() // right after it closed: the store does not list it
			out = run("again")
			assert.Equal(t, tc.outcome2, out.Trace[0].Outcome)
			assert.Equal(t, tc.refunds, tb.Invocations()["issue_refund"])
			if tc.wait > 0 {
				assert.GreaterOrEqual(t, time.Since(begin), lag, "it waited out the lag")
			}
		})
	}
}

// A thread's first run started by the Go client (agent.Start) proves the
// thread new (a describe found no run, and the start used REJECT_DUPLICATE):
// it lists nothing and waits for nothing, even with an hour of configured
// lag; the second run names the first (previous_run_id) and is served its
// refund. A run on a thread that already had runs is never started as new.
func TestNewThreadSkipsTheListing(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	tq := taskQueue(t.Name())
	var lists atomic.Int32
	list := func(ctx context.Context, c client.Client, id string) ([]activities.RunInfo, error) {
		lists.Add(1)
		return laggingVisibility(0)(ctx, c, id)
	}
	refundRun := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	startWorker(t, c, tq, tworker.Options{Tools: tb.Tools(), Hooks: demo.Hooks(),
		Models:       map[string]activities.Model{"refund": refundRun.Model()},
		Checkpointer: activities.TemporalCheckpointer{List: list, VisibilityLag: time.Hour}})
	thread := threadID(t)
	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute) // an hour's wait would end it
	defer cancel()
	_, first, err := agent.Run(ctx, c, agent.RunOptions{TaskQueue: tq, Model: "refund", ThreadID: thread})
	require.NoError(t, err)
	assert.Equal(t, workflow.OutcomeExecuted, first.Trace[0].Outcome)
	assert.Zero(t, lists.Load(), "a new thread lists no runs")

	_, second, err := agent.Run(ctx, c, agent.RunOptions{TaskQueue: tq, Model: "refund", ThreadID: thread})
	require.NoError(t, err)
	assert.Equal(t, workflow.OutcomeCached, second.Trace[0].Outcome, "the second run loaded the first")
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
	hist := c.GetWorkflowHistory(ctx, thread, "", false, 0)
	ev, err := hist.Next()
	require.NoError(t, err)
	var in workflow.RunInput
	require.NoError(t, json.Unmarshal(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &in))
	assert.False(t, in.NewThread, "the second run is not started as new")
	assert.NotEmpty(t, in.PreviousRunID)
}
