package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/threadstore"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// deleteRun deletes one run's history, as the namespace's retention does
// (the Temporal CLI's 'workflow delete -w ID -r RUN'), and waits until the
// server no longer has it.
func deleteRun(t *testing.T, c client.Client, workflowID, runID string) {
	t.Helper()
	_, err := c.WorkflowService().DeleteWorkflowExecution(ctxT(t), &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: server.Namespace(), WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.DescribeWorkflowExecution(ctxT(t), workflowID, runID)
		var nf *serviceerror.NotFound
		return errors.As(err, &nf)
	}, 30*time.Second, 50*time.Millisecond, "run %s still there", runID)
}

// seenModel records the conversation each model call was shown, and plays
// run.
type seenModel struct {
	mu   sync.Mutex
	seen [][]threadstate.Message
	next activities.Model
}

func (m *seenModel) Respond(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
	m.mu.Lock()
	m.seen = append(m.seen, req.Messages)
	m.mu.Unlock()
	return m.next.Respond(ctx, req)
}

// first is the conversation the model was shown in its first call.
func (m *seenModel) first() []threadstate.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) == 0 {
		return nil
	}
	return m.seen[0]
}

// retentionThread is a thread of two runs on a worker with (or without) a
// thread store: the first refunds ord-4821 at a billing service that
// counts every request (the witness), the second only talks. big makes the
// first message 300 KB, so that the state goes by reference and names the
// first run.
type retentionThread struct {
	c       client.Client
	tq      string
	thread  string
	bill    *billing.Server
	again   *seenModel
	runs    []string
	message string
}

func newRetentionThread(t *testing.T, store threadstate.Checkpointer, big bool) *retentionThread {
	t.Helper()
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	hello := scenario.Run{}
	again := &seenModel{next: scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`))}}.Model()}
	opts := workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"first": first.Model(), "hello": hello.Model(), "again": again}}
	if store != nil {
		opts.Checkpointer = threadstate.TemporalCheckpointer{Store: store}
	}
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, opts)
	th := &retentionThread{c: c, tq: tq, thread: threadID(t), bill: bill, again: again, message: "please refund ord-4821"}
	if big {
		th.message += " " + strings.Repeat("x", 300<<10)
	}
	for _, step := range []struct{ model, msg string }{{"first", th.message}, {"hello", "thanks"}} {
		h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: step.model, ThreadID: th.thread, Message: step.msg})
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusCompleted, res.Status)
		th.runs = append(th.runs, h.RunID)
	}
	return th
}

// refundRequests counts the refunds billing was asked for: each is one run
// of the refund's body.
func (th *retentionThread) refundRequests() int { return refundsAsked(th.bill) }

// billedToolbox is the demo toolbox whose refunds go to a billing service
// on loopback that records every request (the witness), stopped when the
// test ends.
func billedToolbox(t *testing.T) (*billing.Server, *demo.Toolbox) {
	t.Helper()
	bill, err := billing.Start()
	require.NoError(t, err)
	t.Cleanup(bill.Close)
	tb := demo.NewToolbox()
	tb.UseBilling(billing.Client{BaseURL: bill.URL()})
	return bill, tb
}

// refundsAsked counts the requests bill's witness saw from issue_refund:
// each is one run of the refund's body.
func refundsAsked(bill *billing.Server) int {
	n := 0
	for _, r := range bill.Witnesses() {
		if r.Tool == "issue_refund" {
			n++
		}
	}
	return n
}

// A thread whose runs' histories were deleted (its older run, or all of
// them) continues from the worker's thread store: the repeated refund is
// served (billing was asked once) and the model sees the whole
// conversation, for a small state (handed on whole) and a large one (by
// reference, naming the deleted run).
func TestThreadOutlivesItsRunsInTheStore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		big    bool
		delete []int // which of the two runs to delete
	}{
		{"older run deleted, small state", false, []int{0}},
		{"older run deleted, state by reference", true, []int{0}},
		{"whole thread deleted, small state", false, []int{0, 1}},
		{"whole thread deleted, state by reference", true, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := newRetentionThread(t, threadstore.DirStore{Dir: t.TempDir()}, tc.big)
			require.Equal(t, 1, th.refundRequests())
			for _, i := range tc.delete {
				deleteRun(t, th.c, th.thread, th.runs[i])
			}
			_, res, err := runclient.Run(ctxT(t), th.c, runclient.RunOptions{TaskQueue: th.tq, Model: "again", ThreadID: th.thread, Message: "did it go through?"})
			require.NoError(t, err)
			require.Equal(t, agentrun.StatusCompleted, res.Status)
			assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome, "the refund is served from the thread's log")
			assert.Equal(t, 1, th.refundRequests(), "billing was asked for one refund")
			seen := th.again.first()
			require.Equal(t, 7, len(seen), "user, assistant (call), tool, assistant; user, assistant; user")
			assert.True(t, seen[0].Content == th.message, "the model sees the thread's first message")
			assert.Contains(t, seen[2].Content, "refund_id", "and the refund's result")
			assert.Equal(t, "thanks", seen[4].Content)
			assert.Equal(t, "did it go through?", seen[6].Content)

			// And on: the run that took the stored state holds it, so the
			// next run needs no deleted run either.
			_, res, err = runclient.Run(ctxT(t), th.c, runclient.RunOptions{TaskQueue: th.tq, Model: "again", ThreadID: th.thread, Message: "and now?"})
			require.NoError(t, err)
			assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
			assert.Equal(t, 1, th.refundRequests())
		})
	}
}

// Without a thread store, a thread whose state names a deleted run fails
// its next run at start with tulip.ThreadLost, naming that run, in seconds
// (it used to fail after the load's ten-minute retry window), and never
// starts empty: billing was asked for one refund.
func TestThreadLostWithoutAStore(t *testing.T) {
	th := newRetentionThread(t, nil, true)
	deleteRun(t, th.c, th.thread, th.runs[0])
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Minute)
	defer cancel()
	begin := time.Now()
	_, _, err := runclient.Run(ctx, th.c, runclient.RunOptions{TaskQueue: th.tq, Model: "again", ThreadID: th.thread, Message: "did it go through?"})
	var failed *runclient.RunFailedError
	require.ErrorAs(t, err, &failed)
	assert.Equal(t, threadstate.ErrThreadLost, failed.Type())
	assert.Contains(t, failed.Error(), th.runs[0], "the error names the deleted run")
	assert.NotContains(t, failed.Error(), "\n")
	assert.Less(t, time.Since(begin), time.Minute)
	assert.Equal(t, 1, th.refundRequests(), "the refund did not run again")
	assert.Empty(t, th.again.seen, "the model was never called")
}

// `tulip dev --db FILE` keeps a thread store beside the database, encrypted
// with the codec key, and a 30-day retention, and says both. A thread whose
// every run was deleted (as retention would) continues from the store: the
// repeated refund is served, and the server's history of that run shows no
// tool activity.
func TestCLIDevThreadOutlivesItsRuns(t *testing.T) {
	dir := t.TempDir()
	keys := writeFile(t, "keys.txt", "k1 "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n")
	banner := devBanner(t, "--db", filepath.Join(dir, "dev.db"), "--port", "0", "--headless", "--codec-key-file", keys)
	assert.Contains(t, banner, "retention: 30 days")
	assert.Contains(t, banner, "threads outlive the retention of their runs in "+filepath.Join(dir, "dev.db.threads"))
	addr := regexp.MustCompile(`--address (\S+)`).FindStringSubmatch(banner)[1]
	kr, err := codec.LoadKeyFile(keys)
	require.NoError(t, err)
	opts := client.Options{HostPort: addr, Logger: quietLogger()}
	kr.ClientOptions(&opts)
	c, err := client.Dial(opts)
	require.NoError(t, err)
	defer c.Close()

	thread := "cli-retention-" + taskQueue("t")
	run := func(msg string) (string, agentrun.RunResult) {
		r, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: "tulip"}, agentrun.WorkflowName,
			map[string]any{"thread_id": thread, "model": "support", "message": msg})
		require.NoError(t, err)
		var out agentrun.RunResult
		require.NoError(t, r.Get(ctxT(t), &out))
		return r.GetRunID(), out
	}
	first, out := run("refund ord-4821")
	require.Equal(t, agentrun.OutcomeExecuted, out.Trace[0].Outcome)
	second, _ := run("lookup ord-4821")
	deleteRun(t, c, thread, first)
	deleteRun(t, c, thread, second)

	third, out := run("refund ord-4821")
	require.Len(t, out.Trace, 1)
	assert.Equal(t, agentrun.OutcomeCached, out.Trace[0].Outcome, "served from the stored thread")
	for _, ev := range history(t, c, thread, third).GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			assert.NotContains(t, a.GetActivityType().GetName(), "issue_refund", "the refund's body was not scheduled")
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "dev.db.threads", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.False(t, bytes.Contains(b, []byte("ord-4821")), "the thread store holds ciphertext")
}

// A run is open (its model call in flight) when the run that holds the
// start of its conversation is deleted, and its worker dies: the model call
// is retried on a new worker, whose cache does not hold the conversation.
// With a thread store it reads the deleted run's part from the store: the
// run completes, its refund served, billing asked once (control, with the
// store's part not read: the model call fails until the run's retry window
// closes). Without a store the run fails at once with tulip.ThreadLost,
// naming the deleted run.
func TestOpenRunOutlivesADeletedRun(t *testing.T) {
	for _, withStore := range []bool{true, false} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) {
			c := dial(t, server.Address())
			bill, tb := billedToolbox(t)
			first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
			again := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`))}}
			inFlight := make(chan struct{})
			var once sync.Once
			blocked := activities.ModelFunc(func(ctx context.Context, _ activities.ModelRequest) (activities.ModelResponse, error) {
				once.Do(func() { close(inFlight) })
				<-ctx.Done()
				return activities.ModelResponse{}, ctx.Err()
			})
			var cp threadstate.Checkpointer
			if withStore {
				cp = threadstate.TemporalCheckpointer{Store: threadstore.DirStore{Dir: t.TempDir()}}
			}
			opts := func(m activities.Model) workerplugin.Options {
				return workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), ModelHeartbeatTimeout: 2 * time.Second,
					Models: map[string]activities.Model{"first": first.Model(), "again": m}, Checkpointer: cp}
			}
			tq := taskQueue(t.Name())
			w1 := startWorker(t, c, tq, opts(blocked))
			thread := threadID(t)
			message := "please refund ord-4821 " + strings.Repeat("x", 300<<10) // the state goes by reference
			h1, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: message})
			require.NoError(t, err)

			h2, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "again", ThreadID: thread, Message: "did it go through?"})
			require.NoError(t, err)
			select {
			case <-inFlight:
			case <-time.After(time.Minute):
				t.Fatal("the second run's model call never started")
			}
			w1.Stop()
			deleteRun(t, c, thread, h1.RunID)
			startWorker(t, c, tq, opts(again.Model()))

			ctx, cancel := context.WithTimeout(ctxT(t), 90*time.Second)
			defer cancel()
			res, err := runclient.Await(ctx, c, h2, "")
			assert.Equal(t, 1, refundsAsked(bill), "billing was asked for one refund")
			if !withStore {
				var failed *runclient.RunFailedError
				require.ErrorAs(t, err, &failed)
				assert.Equal(t, threadstate.ErrThreadLost, failed.Type())
				assert.Contains(t, failed.Error(), h1.RunID)
				return
			}
			if err != nil {
				d, _ := c.DescribeWorkflowExecution(ctxT(t), thread, h2.RunID)
				for _, pa := range d.GetPendingActivities() {
					t.Logf("pending %s attempt %d: %v", pa.GetActivityType().GetName(), pa.GetAttempt(), pa.GetLastFailure())
				}
			}
			require.NoError(t, err)
			require.Equal(t, agentrun.StatusCompleted, res.Status)
			assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
		})
	}
}

// A custom Checkpointer given as the worker's Checkpointer replaces history:
// it is saved at each run's end, so a run terminated before its end leaves
// nothing there, and the next run executes its refund again (as
// docs/threads.md says). The same store given as a TemporalCheckpointer's
// Store keeps the terminated run's refund: history comes first.
func TestCustomCheckpointerLosesATerminatedRun(t *testing.T) {
	for _, asStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", asStore), func(t *testing.T) {
			c := dial(t, server.Address())
			tb := demo.NewToolbox()
			first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
			second := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", refund))}}
			var cp threadstate.Checkpointer = &memStore{}
			if asStore {
				cp = threadstate.TemporalCheckpointer{Store: cp}
			}
			tq := scriptWorker(t, c, tb, map[string]activities.Model{"first": blockingModel(t, first), "second": second.Model()},
				func(o *workerplugin.Options) { o.Checkpointer = cp })
			thread := threadID(t)
			h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: "refund"})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				st, err := runclient.State(ctxT(t), c, h)
				return err == nil && len(st.Trace) == 1
			}, time.Minute, 50*time.Millisecond, "the refund settles, then the model blocks")
			require.NoError(t, c.TerminateWorkflow(ctxT(t), h.WorkflowID, h.RunID, "operator stopped it"))
			_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "second", ThreadID: thread, Message: "again"})
			require.NoError(t, err)
			if asStore {
				assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
				assert.Equal(t, 1, tb.Invocations()["issue_refund"])
			} else {
				assert.Equal(t, agentrun.OutcomeExecuted, res.Trace[0].Outcome, "the custom Checkpointer never saw the terminated run")
				assert.Equal(t, 2, tb.Invocations()["issue_refund"])
			}
		})
	}
}

// A run that continues as new saves its thread's state at the chain's end
// like any other (the chain carries its first run's decision to save): its
// thread, every run deleted, continues from the store. (The soak found it:
// chains never saved, and a thread whose runs were all deleted was lost.)
func TestContinuedChainSavesToTheStore(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund)), turn(call("c2", "lookup_order", `{"order_id": "ord-4821"}`))}}
	again := scenario.Run{Turns: []scenario.Turn{turn(call("c3", "issue_refund", refund))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"first": first.Model(), "again": again.Model()}, func(o *workerplugin.Options) {
		o.Checkpointer = threadstate.TemporalCheckpointer{Store: threadstore.DirStore{Dir: t.TempDir()}}
	})
	thread := threadID(t)
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: "refund", ContinueAfterTurns: 1})
	require.NoError(t, err)
	require.Greater(t, res.ContinuedAsNew, 0, "the run continued as new")
	resp, err := c.ListWorkflow(ctxT(t), &workflowservice.ListWorkflowExecutionsRequest{Query: `WorkflowId = "` + thread + `"`})
	require.NoError(t, err)
	runs := map[string]bool{}
	for _, e := range resp.GetExecutions() {
		runs[e.GetExecution().GetRunId()] = true
	}
	desc, err := c.DescribeWorkflowExecution(ctxT(t), thread, "") // the newest, listed or not yet
	require.NoError(t, err)
	runs[desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()] = true
	require.Greater(t, len(runs), 1)
	for run := range runs {
		deleteRun(t, c, thread, run)
	}
	_, res, err = runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "again", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	assert.Equal(t, 1, refundsAsked(bill), "billing was asked for one refund")
}

// The store holds an older state than history: the thread's second run was
// terminated (it saved nothing), and its first run, which holds the start
// of the conversation, was deleted. The next run takes the newer state
// from history and only the deleted run's part from the store: both
// refunds are served, billing asked for each once.
func TestStoreFillsOnlyWhatHistoryLost(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	other := `{"order_id": "ord-77", "amount": 5.0}`
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	second := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", other))}}
	again := scenario.Run{Turns: []scenario.Turn{turn(call("c3", "issue_refund", refund), call("c4", "issue_refund", other))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"first": first.Model(), "second": blockingModel(t, second), "again": again.Model()},
		func(o *workerplugin.Options) {
			o.Checkpointer = threadstate.TemporalCheckpointer{Store: threadstore.DirStore{Dir: t.TempDir()}}
		})
	thread := threadID(t)
	message := "please refund ord-4821 " + strings.Repeat("x", 300<<10) // the state goes by reference
	h1, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: message})
	require.NoError(t, err)
	h2, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "second", ThreadID: thread, Message: "and ord-77"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := runclient.State(ctxT(t), c, h2)
		return err == nil && len(st.Trace) == 1
	}, time.Minute, 50*time.Millisecond, "the second refund settles, then the model blocks")
	require.NoError(t, c.TerminateWorkflow(ctxT(t), thread, h2.RunID, "operator stopped it"))
	deleteRun(t, c, thread, h1.RunID)

	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "again", ThreadID: thread, Message: "both?"})
	require.NoError(t, err)
	require.Len(t, res.Trace, 2)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[1].Outcome, "the terminated run's refund, from history")
	assert.Equal(t, 2, refundsAsked(bill), "billing was asked for each refund once")
}
