package tests

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// laggingVisibility lists a workflow ID's runs as a visibility store that
// lags by lag would: a run that closed less than lag ago is not listed at
// all (its close, and with a short run its start too, not indexed yet).
func laggingVisibility(lag time.Duration) func(context.Context, client.Client, string) ([]threadstate.RunInfo, error) {
	return func(ctx context.Context, c client.Client, workflowID string) ([]threadstate.RunInfo, error) {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `WorkflowId = "` + workflowID + `"`})
		if err != nil {
			return nil, err
		}
		var out []threadstate.RunInfo
		for _, e := range resp.GetExecutions() {
			d, err := c.DescribeWorkflowExecution(ctx, workflowID, e.GetExecution().GetRunId())
			if err != nil {
				return nil, err
			}
			if ct := d.GetWorkflowExecutionInfo().GetCloseTime(); ct != nil && time.Since(ct.AsTime()) < lag {
				continue // closed too recently to be indexed
			}
			out = append(out, threadstate.RunInfo{RunID: e.GetExecution().GetRunId(), Start: e.GetStartTime().AsTime()})
		}
		return out, nil
	}
}

// visibilityLag is how far laggingVisibility lags in the lag tests.
const visibilityLag = 3 * time.Second

// lagCases are the lag tests' two cases: a load that waits out the lag (the
// refund is served), and the control that does not (it runs again).
var lagCases = []struct {
	name    string
	wait    time.Duration
	refunds int
	outcome agentrun.Outcome
}{
	{"waits out the lag", visibilityLag + 500*time.Millisecond, 1, agentrun.OutcomeCached},
	{"control: no wait", -1, 2, agentrun.OutcomeExecuted},
}

// laggingWorker runs a worker whose thread loads list runs through a store
// lagging by visibilityLag and wait that long (negative: not at all); its
// models: "hello" (no call), "first" (a refund), "again" (the same refund,
// its fields reordered).
func laggingWorker(t *testing.T, wait time.Duration) (client.Client, *demo.Toolbox, string) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	tq := taskQueue(t.Name())
	refundRun := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	again := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`))}}
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(),
		Models:       map[string]activities.Model{"hello": scenario.Run{}.Model(), "first": refundRun.Model(), "again": again.Model()},
		Checkpointer: threadstate.TemporalCheckpointer{List: laggingVisibility(visibilityLag), VisibilityLag: wait}})
	return c, tb, tq
}

// A plain start (no previous_run_id) right after the thread's previous run
// closed, against a visibility store that does not list that run yet: the
// run waits out the configured lag and loads the newest state (the refund
// is served). The control, with no wait, loads the older state and the
// refund runs again: the lagging store is real, and the wait is what
// guards against it.
func TestPlainStartBehindLaggingVisibility(t *testing.T) {
	for _, tc := range lagCases {
		t.Run(tc.name, func(t *testing.T) {
			c, tb, tq := laggingWorker(t, tc.wait)
			thread := threadID(t)
			run := func(model string) agentrun.RunResult {
				r, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: tq}, agentrun.WorkflowName,
					map[string]any{"thread_id": thread, "model": model, "message": "hi"})
				require.NoError(t, err)
				var out agentrun.RunResult
				require.NoError(t, r.Get(ctxT(t), &out))
				return out
			}
			run("hello") // an older run, long closed when the last one starts: no refund in it
			time.Sleep(visibilityLag + 500*time.Millisecond)
			out := run("first") // the refund executes
			require.Equal(t, agentrun.OutcomeExecuted, out.Trace[0].Outcome)

			begin := time.Now() // right after it closed: the store does not list it
			out = run("again")
			assert.Equal(t, tc.outcome, out.Trace[0].Outcome)
			assert.Equal(t, tc.refunds, tb.Invocations()["issue_refund"])
			if tc.wait > 0 {
				assert.GreaterOrEqual(t, time.Since(begin), visibilityLag, "it waited out the lag")
			}
		})
	}
}

// A thread's first run started by the Go client (runclient.Start) proves the
// thread new (a describe found no run, and the start used REJECT_DUPLICATE):
// it lists nothing and waits for nothing, even with an hour of configured
// lag; the second run names the first (previous_run_id), reads it without
// listing the thread's runs either, and is served its refund. A run on a
// thread that already had runs is never started as new.
func TestNewThreadSkipsTheListing(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	tq := taskQueue(t.Name())
	lists := countedListingWorker(t, c, tq, tb, time.Hour)
	thread := threadID(t)
	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute) // an hour's wait would end it
	defer cancel()
	_, first, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "refund", ThreadID: thread})
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeExecuted, first.Trace[0].Outcome)
	assert.Zero(t, lists.Load(), "a new thread lists no runs")

	_, second, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "refund", ThreadID: thread})
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeCached, second.Trace[0].Outcome, "the second run loaded the first")
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
	assert.Zero(t, lists.Load(), "a start that names its previous run lists no runs")
	hist := c.GetWorkflowHistory(ctx, thread, "", false, 0)
	ev, err := hist.Next()
	require.NoError(t, err)
	var in agentrun.RunInput
	require.NoError(t, json.Unmarshal(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &in))
	assert.False(t, in.NewThread, "the second run is not started as new")
	assert.NotEmpty(t, in.PreviousRunID)
}

// slowServer makes a client's visibility listings (ListWorkflowExecutions)
// answer after list, and its activity heartbeats after heartbeat, as a
// loaded server does, and counts the listings that waited theirs out.
// With refuse set, the heartbeats sent within refuse of the first listing
// fail at once as unavailable, as during a server restart.
type slowServer struct {
	list, heartbeat, refuse time.Duration
	served                  atomic.Int32
	refused                 atomic.Int32
	firstList               atomic.Int64 // unix nanoseconds
}

func (s *slowServer) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	delay := time.Duration(0)
	switch method {
	case workflowservice.WorkflowService_ListWorkflowExecutions_FullMethodName:
		s.firstList.CompareAndSwap(0, time.Now().UnixNano())
		delay = s.list
	case workflowservice.WorkflowService_RecordActivityTaskHeartbeat_FullMethodName:
		if from := s.firstList.Load(); from != 0 && time.Since(time.Unix(0, from)) < s.refuse {
			s.refused.Add(1)
			return status.Error(codes.Unavailable, "the server is restarting")
		}
		delay = s.heartbeat
	}
	if delay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	if method == workflowservice.WorkflowService_ListWorkflowExecutions_FullMethodName {
		s.served.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A plain start (no previous_run_id) finds the thread's newest run by a
// visibility listing. The SDK's client gives a listing at most 10 s; a
// store that answers in 12 s (a busy SQLite server did, in a soak of 160
// threads) failed every attempt of the thread load until its retry window
// closed and the run failed. The load lists with the activity's own
// deadline instead: each run loads in one attempt and the second run's
// refund is served (one refund at billing). On the old listing the second
// run never completes in the test's time.
func TestSlowVisibilityListingKeepsTheAttempt(t *testing.T) {
	slow := &slowServer{list: 12 * time.Second}
	th := newPlainThread(t, slow, nil)
	require.Equal(t, agentrun.OutcomeExecuted, th.run(t, "first", 45*time.Second).Trace[0].Outcome)
	assert.Equal(t, agentrun.OutcomeCached, th.run(t, "again", 45*time.Second).Trace[0].Outcome)
	assert.Equal(t, 1, th.tb.Invocations()["issue_refund"], "billing saw one refund")
	assert.GreaterOrEqual(t, slow.served.Load(), int32(2), "each plain start listed the thread's runs, 12 s each")
	th.assertFirstAttempts(t)
}

// A server that answers heartbeats in 1.5 s, and listings in 12 s (more
// than the thread load's 10 s heartbeat timeout). The SDK gives a
// heartbeat no longer than the worker's heartbeat throttle (1 s under the
// plugin): every heartbeat failed, each attempt was timed out by the
// server, and neither run completed (control run here on the old
// heartbeats). Heartbeats through the client, each with three quarters of
// the heartbeat timeout: each run loads, calls its model and its tool in
// one attempt, and the second refund is served (billing sees one).
func TestSlowHeartbeatAnswersKeepTheAttempt(t *testing.T) {
	slow := &slowServer{list: 12 * time.Second, heartbeat: 1500 * time.Millisecond}
	th := newPlainThread(t, slow, nil)
	require.Equal(t, agentrun.OutcomeExecuted, th.run(t, "first", 45*time.Second).Trace[0].Outcome)
	assert.Equal(t, agentrun.OutcomeCached, th.run(t, "again", 45*time.Second).Trace[0].Outcome)
	assert.Equal(t, 1, th.tb.Invocations()["issue_refund"], "billing saw one refund")
	th.assertFirstAttempts(t)
}

// Heartbeats refused as unavailable for 4 s (a server restarting) while
// the thread load waits 12 s for its listing. The SDK cancelled the
// attempt at the first heartbeat that failed so, and the load started
// over (control run here on the old heartbeats: attempt 2). Now a failed
// heartbeat is tried again until the heartbeat timeout (10 s): the load
// completes in its first attempt.
func TestRefusedHeartbeatsKeepTheAttempt(t *testing.T) {
	slow := &slowServer{list: 12 * time.Second, refuse: 4 * time.Second}
	th := newPlainThread(t, slow, nil)
	require.Equal(t, agentrun.OutcomeExecuted, th.run(t, "first", 45*time.Second).Trace[0].Outcome)
	assert.Equal(t, int32(1), slow.served.Load(), "one listing")
	assert.Positive(t, slow.refused.Load(), "heartbeats were refused")
	th.assertFirstAttempts(t)
}

// plainThread is a thread whose runs are started plainly (no
// previous_run_id) on a worker whose client passes its visibility listings
// through listing, with two scripts: "first" refunds an order, "again"
// refunds the same order.
type plainThread struct {
	c      client.Client
	tb     *demo.Toolbox
	tq     string
	thread string
	last   client.WorkflowRun // the run run started last
}

func newPlainThread(t *testing.T, listing *slowServer, interceptors []interceptor.WorkerInterceptor) *plainThread {
	wc, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(listing.intercept)}}})
	require.NoError(t, err)
	t.Cleanup(wc.Close)
	th := &plainThread{c: dial(t, server.Address()), tb: demo.NewToolbox(), tq: taskQueue(t.Name()), thread: threadID(t)}
	refundRun := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	again := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`))}}
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: th.tb.Tools(), Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"first": refundRun.Model(), "again": again.Model()}})
	require.NoError(t, err)
	w := sdkworker.New(wc, th.tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}, Interceptors: interceptors})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return th
}

// assertFirstAttempts checks that every activity of the last run
// completed in its first attempt.
func (th *plainThread) assertFirstAttempts(t *testing.T) {
	t.Helper()
	for _, e := range history(t, th.c, th.thread, th.last.GetRunID()).GetEvents() {
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			assert.Equal(t, int32(1), a.GetAttempt(), "event %d: an activity retried", e.GetEventId())
		}
	}
}

// run starts model's run plainly and waits up to timeout for its result.
func (th *plainThread) run(t *testing.T, model string, timeout time.Duration) agentrun.RunResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := th.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: th.thread, TaskQueue: th.tq}, agentrun.WorkflowName,
		map[string]any{"thread_id": th.thread, "model": model, "message": "hi"})
	require.NoError(t, err)
	var out agentrun.RunResult
	require.NoError(t, r.Get(ctx, &out), "the run did not complete")
	th.last = r
	return out
}

// failFirstLoad fails the first attempt of every thread load after it has
// done its work and its heartbeat has gone out, as a worker killed late in
// the attempt would.
type failFirstLoad struct {
	interceptor.WorkerInterceptorBase
}

func (f *failFirstLoad) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &failFirstLoadInbound{}
	i.Next = next
	return i
}

type failFirstLoadInbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *failFirstLoadInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := i.Next.ExecuteActivity(ctx, in)
	if info := activity.GetInfo(ctx); err == nil && info.ActivityType.Name == protocol.LoadThreadActivity && info.Attempt == 1 {
		time.Sleep(2 * time.Second) // past the heartbeat throttle (1 s): the list's heartbeat reached the server
		return nil, errors.New("the attempt ends before it could report")
	}
	return out, err
}

// A plain start's thread load lists the thread's runs once: when an
// attempt ends after the listing (its worker died, say), the next attempt
// takes the list from the heartbeat the first one sent, instead of
// listing again on a server that may be what made the first attempt slow.
// Two plain starts whose first load attempt fails: two listings in all,
// each run's load is attempt 2, and the second refund is served (billing
// sees one). On the old load, every attempt lists: four.
func TestThreadLoadKeepsItsListingAcrossAttempts(t *testing.T) {
	count := &slowServer{}
	th := newPlainThread(t, count, []interceptor.WorkerInterceptor{&failFirstLoad{}})
	require.Equal(t, agentrun.OutcomeExecuted, th.run(t, "first", 2*time.Minute).Trace[0].Outcome)
	assert.Equal(t, agentrun.OutcomeCached, th.run(t, "again", 2*time.Minute).Trace[0].Outcome)
	assert.Equal(t, 1, th.tb.Invocations()["issue_refund"], "billing saw one refund")
	assert.Equal(t, int32(2), count.served.Load(), "one listing a run")
	loads := 0
	for _, e := range history(t, th.c, th.thread, th.last.GetRunID()).GetEvents() {
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() == 2 {
			loads++
		}
	}
	assert.Equal(t, 1, loads, "the load's second attempt")
}

// countedListingWorker starts a worker on tq whose model "refund" refunds
// an order, with a checkpointer of the given visibility lag whose listings
// (of an up-to-date store) it counts.
func countedListingWorker(t *testing.T, c client.Client, tq string, tb *demo.Toolbox, lag time.Duration) *atomic.Int32 {
	var lists atomic.Int32
	list := func(ctx context.Context, c client.Client, id string) ([]threadstate.RunInfo, error) {
		lists.Add(1)
		return laggingVisibility(0)(ctx, c, id)
	}
	refundRun := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(),
		Models:       map[string]activities.Model{"refund": refundRun.Model()},
		Checkpointer: threadstate.TemporalCheckpointer{List: list, VisibilityLag: lag}})
	return &lists
}

// A start names a previous run that left nothing (terminated before its
// first workflow task): the load lists the thread's runs and takes the one
// before it, and the refund is served.
func TestHintThatLeftNothingFallsBackToTheListing(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	tq := taskQueue(t.Name())
	lists := countedListingWorker(t, c, tq, tb, 0)
	thread := threadID(t)
	_, first, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "refund", ThreadID: thread})
	require.NoError(t, err)
	require.Equal(t, agentrun.OutcomeExecuted, first.Trace[0].Outcome)

	// A run no worker picks up (its task queue has none), terminated.
	empty, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: tq + "-none"}, agentrun.WorkflowName,
		map[string]any{"thread_id": thread, "model": "refund", "message": "hi"})
	require.NoError(t, err)
	require.NoError(t, c.TerminateWorkflow(ctxT(t), thread, empty.GetRunID(), "left nothing"))

	h, again, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "refund", ThreadID: thread})
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeCached, again.Trace[0].Outcome, "the run before the empty one was loaded")
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
	assert.Equal(t, int32(1), lists.Load(), "the empty hint made the load list")
	hist := c.GetWorkflowHistory(ctxT(t), thread, h.RunID, false, 0)
	ev, err := hist.Next()
	require.NoError(t, err)
	var in agentrun.RunInput
	require.NoError(t, json.Unmarshal(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &in))
	assert.Equal(t, empty.GetRunID(), in.PreviousRunID, "the hint was the empty run")
}

// A start names a previous run that left nothing (terminated before its
// first task) and that started right after the thread's refund closed; the
// load falls back to the listing, against a store that does not list that
// refund yet. It waits out the configured lag from the hint's start, and
// the refund is served. The control, with no wait, loads the older state
// and the refund runs again (before the fix, a hinted load never waited).
func TestHintFallbackWaitsOutTheLag(t *testing.T) {
	for _, tc := range lagCases {
		t.Run(tc.name, func(t *testing.T) {
			c, tb, tq := laggingWorker(t, tc.wait)
			thread := threadID(t)
			_, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "hello", ThreadID: thread})
			require.NoError(t, err)
			time.Sleep(visibilityLag + 500*time.Millisecond) // the older run, listed by now: no refund in it
			_, first, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread})
			require.NoError(t, err)
			require.Equal(t, agentrun.OutcomeExecuted, first.Trace[0].Outcome)

			// Right after it: a run no worker picks up, terminated.
			empty, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: tq + "-none"}, agentrun.WorkflowName,
				map[string]any{"thread_id": thread, "model": "first", "message": "hi"})
			require.NoError(t, err)
			require.NoError(t, c.TerminateWorkflow(ctxT(t), thread, empty.GetRunID(), "left nothing"))

			_, again, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "again", ThreadID: thread})
			require.NoError(t, err)
			assert.Equal(t, tc.outcome, again.Trace[0].Outcome)
			assert.Equal(t, tc.refunds, tb.Invocations()["issue_refund"])
		})
	}
}
