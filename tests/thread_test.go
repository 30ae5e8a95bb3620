package tests

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

func threadID(t *testing.T) string { return taskQueue("thread-" + t.Name()) }

// (a) A second run on a thread sends the model the first run's
// conversation, then the new message: seen in the request bodies of a
// loopback OpenAI-compatible server.
func TestThreadConversationReachesTheModel(t *testing.T) {
	f := newFakeOpenAI(t,
		toolCalls([3]string{"call_a", "issue_refund", refund}),
		answer("Refunded."),
		toolCalls([3]string{"call_b", "issue_refund", refund}),
		answer("It was already refunded."),
	)
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	m, err := openaimodel.New(openaimodel.Options{BaseURL: f.URL + "/v1", Model: "gpt-test", SystemPrompt: "sys"})
	require.NoError(t, err)
	tb := demo.NewToolbox()
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"gpt": activities.PublicModel(m)}})
	thread := threadID(t)
	for _, msg := range []string{"Please refund ord-4821", "Did that go through? Refund it if not."} {
		_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "gpt", ThreadID: thread, Message: msg})
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusCompleted, res.Status)
	}
	reqs := f.requests()
	require.Len(t, reqs, 4)
	var roles, contents []string
	for _, m := range messagesOf(t, reqs[2]) {
		roles = append(roles, m["role"].(string))
		s, _ := m["content"].(string)
		contents = append(contents, s)
	}
	assert.Equal(t, []string{"system", "user", "assistant", "tool", "assistant", "user"}, roles)
	assert.Equal(t, "Please refund ord-4821", contents[1])
	assert.Contains(t, contents[3], "refund_id")
	assert.Equal(t, "Refunded.", contents[4])
	assert.Equal(t, "Did that go through? Refund it if not.", contents[5])
	assert.Equal(t, 1, tb.Invocations()["issue_refund"], "the second run's refund was served from the thread's log")
}

// scriptWorker runs a worker whose model "script" plays run, and whose
// model "block" blocks until the test ends.
func scriptWorker(t *testing.T, c client.Client, tb *demo.Toolbox, models map[string]activities.Model, opts ...func(*workerplugin.Options)) string {
	tq := taskQueue(t.Name())
	o := workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: models}
	for _, f := range opts {
		f(&o)
	}
	startWorker(t, c, tq, o)
	return tq
}

// refundedThread runs "first" on a new thread: it refunds ord-4821 (the
// refund executed). The worker on tq also has model "second", which asks
// for the same refund with its fields reordered.
func refundedThread(t *testing.T) (client.Client, *demo.Toolbox, string, string) {
	t.Helper()
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	second := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", `{"amount": 120, "order_id": "ord-4821"}`))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"first": first.Model(), "second": second.Model()})
	thread := threadID(t)
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: "refund"})
	require.NoError(t, err)
	require.Equal(t, agentrun.OutcomeExecuted, res.Trace[0].Outcome)
	return c, tb, tq, thread
}

// (b) A plain start of tulip.AgentRun by any client (here the Go SDK's raw
// ExecuteWorkflow with only documented JSON fields, no previous_run_id)
// continues the thread: the earlier refund is served.
func TestPlainStartContinuesThread(t *testing.T) {
	c, tb, tq, thread := refundedThread(t)

	run, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: tq}, agentrun.WorkflowName,
		map[string]any{"thread_id": thread, "model": "second", "message": "refund again"})
	require.NoError(t, err)
	var out agentrun.RunResult
	require.NoError(t, run.Get(ctxT(t), &out))
	require.Len(t, out.Trace, 1)
	assert.Equal(t, agentrun.OutcomeCached, out.Trace[0].Outcome)
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
	require.NotNil(t, out.State)
	assert.Nil(t, out.State.Conversation, "a small thread's state holds its conversation itself")
	assert.Len(t, out.State.Messages, 8, "both runs' messages: user, assistant (call), tool, assistant (answer), twice")
}

// blockingModel plays run, and blocks (until the test ends) when its
// script runs out instead of answering.
func blockingModel(t *testing.T, run scenario.Run) activities.Model {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	script := run.Model()
	return activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if req.PhaseTurn <= len(run.Turns) {
			return script.Respond(ctx, req)
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
		return activities.ModelResponse{}, errors.New("stopped")
	})
}

// (c) A run terminated mid-way, after its refund executed, left no result
// and no checkpoint: the next run on the thread still serves that refund
// (its records are read back from the terminated run's history).
func TestTerminatedRunKeepsItsRecords(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund), call("c2", "mint_case_id", "{}"))}}
	second := scenario.Run{Turns: []scenario.Turn{turn(call("c3", "issue_refund", refund))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"first": blockingModel(t, first), "second": second.Model()})
	thread := threadID(t)
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: "refund"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := runclient.State(ctxT(t), c, h)
		return err == nil && len(st.Trace) == 2
	}, time.Minute, 50*time.Millisecond, "the refund settles, then the model blocks")
	require.NoError(t, c.TerminateWorkflow(ctxT(t), h.WorkflowID, h.RunID, "operator stopped it"))
	_, err = runclient.Await(ctxT(t), c, h, "")
	var failed *runclient.RunFailedError
	require.ErrorAs(t, err, &failed)
	assert.Equal(t, "agent run was terminated", failed.Error())

	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "second", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	require.Len(t, res.Trace, 1)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	assert.Equal(t, 1, tb.Invocations()["issue_refund"], "the refund body ran once")
	recs, err := runclient.ThreadLog(ctxT(t), c, thread, "")
	require.NoError(t, err)
	require.Len(t, recs, 3, "the terminated run's refund and mint, and the served refund")
	assert.Equal(t, h.RunID, recs[0].Run)
}

// (d) Unknown or misspelled fields are refused: at start (the run fails
// with tulip.BadInput naming the field), by update (the validator refuses
// it before it is accepted), by signal (dropped whole, the run goes on).
func TestStrictInputs(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	run := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "isolate_host", `{"host": "web-1"}`))},
		Resumes: []scenario.Resume{{Answer: "ok", PerformDangling: true}}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"m": run.Model()})

	t.Run("start", func(t *testing.T) {
		r, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: threadID(t), TaskQueue: tq}, agentrun.WorkflowName,
			map[string]any{"threadId": "t-1", "model": "m", "maxTurns": 3})
		require.NoError(t, err)
		err = r.Get(ctxT(t), nil)
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app)
		assert.Equal(t, protocol.ErrBadInput, app.Type())
		assert.Equal(t, `run input: unknown fields "maxTurns" (did you mean "max_turns"?), "threadId" (did you mean "thread_id"?)`, app.Message(),
			"every unknown field, named")
		assert.True(t, app.NonRetryable())
		// Every failure's details are the RunResult so far (here: nothing
		// ran), its trace an array.
		var details agentrun.RunResult
		require.NoError(t, app.Details(&details))
		assert.Equal(t, agentrun.StatusFailed, details.Status)
		assert.Equal(t, app.Message(), details.Error)
		assert.NotNil(t, details.Trace)
		assert.Nil(t, details.State, "a refused run leaves no state")
	})

	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Hooks: []string{"approve_isolate_host"}})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	intID := res.Interrupt.ID

	t.Run("update", func(t *testing.T) {
		for name, body := range map[string]map[string]any{
			"resume camelCase": {"interruptId": intID, "answer": "ok", "performDangling": true},
			"resume unknown":   {"interrupt_id": intID, "answer": "ok", "perform_dangling": true, "force": true},
		} {
			err := update(t, c, h.WorkflowID, agentrun.UpdateResume, body)
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app, name)
			assert.Equal(t, protocol.ErrBadInput, app.Type(), name)
		}
		err := update(t, c, h.WorkflowID, agentrun.UpdateHooks, map[string]any{"installHooks": []string{"upper_order_id"}})
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app)
		assert.Equal(t, protocol.ErrBadInput, app.Type())
		assert.Contains(t, app.Message(), `unknown field "installHooks"`)
	})

	t.Run("signal", func(t *testing.T) {
		require.NoError(t, c.SignalWorkflow(ctxT(t), h.WorkflowID, "", agentrun.SignalResume,
			map[string]any{"interruptId": intID, "answer": "ok", "performDangling": true}))
		time.Sleep(300 * time.Millisecond)
		st, err := runclient.State(ctxT(t), c, h)
		require.NoError(t, err)
		assert.Equal(t, agentrun.StatusInterrupted, st.Status, "the misspelled signal was dropped, not half-applied")
		require.NoError(t, runclient.ResumeBySignal(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: intID, Answer: "ok", PerformDangling: true}))
		res, err := runclient.Await(ctxT(t), c, h, intID)
		require.NoError(t, err)
		assert.Equal(t, agentrun.StatusCompleted, res.Status)
		assert.Equal(t, agentrun.OutcomeDangling, res.Trace[len(res.Trace)-1].Outcome, "the held call ran")
	})
}

// update sends an update and returns its outcome's error.
func update(t *testing.T, c client.Client, workflowID, name string, arg any) error {
	h, err := c.UpdateWorkflow(ctxT(t), client.UpdateWorkflowOptions{WorkflowID: workflowID, UpdateName: name,
		Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return err
	}
	return h.Get(ctxT(t), nil)
}

// A failed run is one clean line; its type and result stay in the error.
func TestRunFailedIsOneLine(t *testing.T) {
	c := dial(t, server.Address())
	forever := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "m", Name: "mint_case_id", Arguments: "{}"}}}, nil
	})
	tq := scriptWorker(t, c, demo.NewToolbox(), map[string]activities.Model{"m": forever})
	_, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", MaxTurns: 2})
	var failed *runclient.RunFailedError
	require.ErrorAs(t, err, &failed)
	assert.Equal(t, "agent run failed (tulip.MaxTurnsExceeded): the run reached its limit of 2 model turns", failed.Error())
	assert.Equal(t, protocol.ErrMaxTurns, failed.Type())
	require.NotNil(t, failed.Result)
	assert.Len(t, failed.Result.Trace, 2)
}

var _ = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING

// A run refused at start (a misspelled field) leaves nothing on its
// thread, and the next run still finds the state before it.
func TestRefusedRunLeavesThreadIntact(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	third := scenario.Run{Turns: []scenario.Turn{turn(call("c3", "issue_refund", refund))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"first": first.Model(), "third": third.Model()})
	thread := threadID(t)
	_, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: "refund"})
	require.NoError(t, err)
	bad, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{ID: thread, TaskQueue: tq}, agentrun.WorkflowName,
		map[string]any{"thread_id": thread, "model": "third", "mesage": "typo"})
	require.NoError(t, err)
	var app *temporal.ApplicationError
	require.ErrorAs(t, bad.Get(ctxT(t), nil), &app)
	require.Equal(t, protocol.ErrBadInput, app.Type())
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "third", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
}

// A run that fails mid-run (here tulip.UnknownHook: its model asks for a
// hook the worker does not have) after it loaded its thread leaves its
// state in its failure's details, and the thread's next run loads it: its
// refund is served, not run again.
func TestFailedRunMidThreadKeepsItsRecords(t *testing.T) {
	c, tb, _, thread := refundedThread(t)
	other := `{"order_id": "ord-7", "amount": 5}`
	failing := scenario.Run{Turns: []scenario.Turn{
		turn(call("f1", "issue_refund", other)),
		{InstallHooks: []string{"no_such_hook"}, ToolCalls: []threadstate.ToolCall{call("f2", "lookup_order", `{"order_id": "ord-7"}`)}},
	}}
	again := scenario.Run{Turns: []scenario.Turn{turn(call("a1", "issue_refund", other))}}
	tq2 := scriptWorker(t, c, tb, map[string]activities.Model{"failing": failing.Model(), "again": again.Model()})
	_, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq2, Model: "failing", ThreadID: thread, Message: "refund ord-7"})
	var failed *runclient.RunFailedError
	require.ErrorAs(t, err, &failed)
	require.Equal(t, protocol.ErrUnknownHook, failed.Type())
	require.Equal(t, 2, tb.Invocations()["issue_refund"])

	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq2, Model: "again", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome, "the failed run's refund is in the thread")
	assert.Equal(t, 2, tb.Invocations()["issue_refund"])
}

// Whether a run saves its state through a custom Checkpointer is in its
// history (the load activity's answer), not read from the worker's
// options: a run recorded with a custom Checkpointer replays on a worker
// without one, and the other way round.
func TestCheckpointerChoiceReplays(t *testing.T) {
	c := dial(t, server.Address())
	for _, custom := range []bool{true, false} {
		tb := demo.NewToolbox()
		run := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
		opts := func(o *workerplugin.Options) {
			if custom {
				o.Checkpointer = &memStore{}
			}
		}
		tq := scriptWorker(t, c, tb, map[string]activities.Model{"m": run.Model()}, opts)
		thread := threadID(t)
		h, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "go"})
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "h.json")
		writeHistory(t, c, h, file)
		replayOpts := workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks()}
		if !custom {
			replayOpts.Checkpointer = &memStore{}
		}
		assert.NoError(t, workerplugin.ReplayHistories(replayOpts, workerplugin.ReplayOptions{}, file), "recorded with a custom checkpointer: %v", custom)
	}
}

// memStore is a custom Checkpointer in memory.
type memStore struct {
	mu sync.Mutex
	m  map[string]*threadstate.Checkpoint
}

func (s *memStore) Load(_ context.Context, ref threadstate.ThreadRef) (*threadstate.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[ref.ThreadID], nil
}

func (s *memStore) Save(_ context.Context, ref threadstate.ThreadRef, cp *threadstate.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*threadstate.Checkpoint{}
	}
	s.m[ref.ThreadID] = cp
	return nil
}
