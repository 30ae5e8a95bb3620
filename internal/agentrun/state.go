package agentrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// loadCheckpoint loads the thread's state before the first call: its
// conversation and this agent's log. The run finds the thread's earlier
// runs itself (threadstate.TemporalCheckpointer), so any client that starts
// a run on a thread continues it.
func (r *run) loadCheckpoint(ctx wf.Context) error {
	if r.in.ThreadID == "" {
		return nil
	}
	if !r.carriesThread && r.in.PreviousRunID == "" && !r.cfg.CustomCheckpointer {
		return nil // as recorded before runs found their thread themselves
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		RetryPolicy:            retryUntilWindow(),
		ScheduleToCloseTimeout: RetryWindow,
	})
	var cp threadstate.Checkpoint
	ref := threadstate.ThreadRef{ThreadID: wf.GetInfo(ctx).WorkflowExecution.ID, RunID: r.runID, PreviousRunID: r.in.PreviousRunID}
	if err := wf.ExecuteActivity(actx, protocol.LoadCheckpointActivity, ref).Get(ctx, &cp); err != nil {
		return err
	}
	if err := r.useCheckpoint(&cp); err != nil {
		return err
	}
	r.baseLen = r.log.Len()
	return nil
}

// loadThread loads the thread's state before the first call, by reference
// (refs.go), and learns from the load whether the run saves its state at
// its end: the decision is in the run's history, not read from the
// worker's configuration.
func (r *run) loadThread(ctx wf.Context) error {
	if r.in.ThreadID == "" {
		return nil
	}
	if r.in.TestEnv {
		// No server to read a thread from, nor to ask about it: a new
		// thread starts empty, and one with runs cannot be read.
		if !r.in.NewThread || r.in.PreviousRunID != "" {
			return badInput(fmt.Sprintf("thread %s has runs already: the SDK's test environment has no server to read them from; test threads on a dev server (docs/tour.md)", r.in.ThreadID))
		}
		return nil
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            retryUntilWindow(),
		ScheduleToCloseTimeout: RetryWindow,
	})
	info := wf.GetInfo(ctx)
	ref := threadstate.ThreadRef{ThreadID: info.WorkflowExecution.ID, RunID: r.runID, PreviousRunID: r.in.PreviousRunID,
		NewThread: r.in.NewThread, Started: info.WorkflowStartTime}
	var lt threadstate.LoadedThread
	if err := wf.ExecuteActivity(actx, protocol.LoadThreadActivity, ref).Get(ctx, &lt); err != nil {
		return err
	}
	r.save = lt.Save
	if lt.State != nil {
		if err := r.adopt(lt.State); err != nil {
			return err
		}
	}
	r.baseLen = r.log.Len()
	// Keys never repeat on a thread: an earlier run may have used counts
	// past its log's length (executions no record holds: held calls a
	// resume performed, calls still executing when it stopped). Runs
	// recorded before "tulip-key-counter" counted from the log's length.
	if lt.State != nil {
		if m := lt.State.Minted[r.in.Agent]; m > r.baseLen && r.version(ctx, "tulip-key-counter") == 1 {
			r.baseLen = m
		}
	}
	return nil
}

// useCheckpoint takes a thread state: this agent's log and, in runs that
// carry it, the conversation (runs before state went by reference).
func (r *run) useCheckpoint(cp *threadstate.Checkpoint) error {
	r.loaded = cp
	r.threadBase, r.threadByModel = cp.Usage, cp.UsageByModel
	if snap, ok := cp.Agents[r.in.Agent]; ok && r.dedup {
		l, err := dedup.Restore(snap)
		if err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("thread %s: %v", r.in.ThreadID, err), protocol.ErrCheckpoint, nil)
		}
		r.calls.Load(l)
		r.log = l
	}
	if r.carriesThread {
		r.messages = nil
		r.digest, r.undigested = "", 0
		for _, m := range cp.Messages {
			r.addMessage(m)
		}
	}
	return nil
}

// checkpoint is the thread's state as of now: the loaded agents' logs with
// this agent's replaced, and the conversation. Pending records (calls still
// executing) are left out, and calls with no result yet get one that says
// so, so the conversation stays well formed for the model.
func (r *run) checkpoint(settledOnly bool) (*threadstate.Checkpoint, error) {
	cp := &threadstate.Checkpoint{Agents: map[string]json.RawMessage{}}
	if r.loaded != nil {
		maps.Copy(cp.Agents, r.loaded.Agents)
	}
	snapshot := r.log.Snapshot
	if settledOnly {
		snapshot = r.log.SnapshotSettled
	}
	snap, err := snapshot()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), protocol.ErrCheckpoint, nil)
	}
	cp.Agents[r.in.Agent] = snap
	if r.carriesThread {
		cp.Messages = closeConversation(r.messages)
	}
	if r.countsThread {
		cp.Usage, cp.UsageByModel = r.threadUsage()
	}
	cp.Fork = r.forkOf
	return cp, nil
}

// closeConversation answers, with an error result, every call of the last
// assistant message that has no tool message yet (a run that stopped in the
// middle of a response).
func closeConversation(msgs []threadstate.Message) []threadstate.Message {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			last = i
			break
		}
	}
	if last < 0 || len(msgs[last].ToolCalls) == 0 {
		return msgs
	}
	answered := map[string]bool{}
	for _, m := range msgs[last+1:] {
		if m.Role == "tool" {
			answered[m.ToolCallID] = true
		}
	}
	out := msgs
	for _, c := range msgs[last].ToolCalls {
		if !answered[c.ID] {
			if len(out) == len(msgs) {
				out = slices.Clone(msgs)
			}
			out = append(out, toolMessage(c.ID, nil, errText("not completed: the run stopped before this call settled"), false))
		}
	}
	return out
}

func (r *run) saveCheckpoint(ctx wf.Context, res *RunResult) error {
	if r.in.ThreadID == "" {
		return nil
	}
	if r.stateByRef {
		return r.saveThread(ctx, res)
	}
	cp, err := r.checkpoint(false)
	if err != nil {
		return err
	}
	res.Checkpoint = cp
	if !r.cfg.CustomCheckpointer {
		return nil
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy:            retryUntilWindow(),
		ScheduleToCloseTimeout: RetryWindow,
	})
	ref := threadstate.ThreadRef{ThreadID: wf.GetInfo(ctx).WorkflowExecution.ID, RunID: r.runID, PreviousRunID: r.in.PreviousRunID}
	return wf.ExecuteActivity(actx, protocol.SaveCheckpointActivity, ref, cp).Get(ctx, nil)
}

// saveThread puts the thread's state, by reference, in the run's result,
// and saves it in full through the worker's Checkpointer when the load said
// so (a custom one, or a thread store).
func (r *run) saveThread(ctx wf.Context, res *RunResult) error {
	st, err := r.handover(false)
	if err != nil {
		return err
	}
	res.State = st
	if !r.save {
		return nil
	}
	full, err := r.refState(false, true)
	if err != nil {
		return err
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            retryUntilWindow(),
		ScheduleToCloseTimeout: RetryWindow,
	})
	// Started orders the saves of a thread's runs: a store keeps the
	// state of the run that started last. (An activity's input is not
	// compared on replay.)
	info := wf.GetInfo(ctx)
	ref := threadstate.ThreadRef{ThreadID: info.WorkflowExecution.ID, RunID: r.runID, PreviousRunID: r.in.PreviousRunID, Started: info.WorkflowStartTime}
	err = wf.ExecuteActivity(actx, protocol.SaveThreadActivity, ref, full).Get(ctx, nil)
	if err == nil || r.version(ctx, "tulip-save-failure-completes") == wf.DefaultVersion {
		return err
	}
	// The answer is computed and history holds the state: a store that
	// would not take it (after the save's retries) does not drop the
	// answer. The thread's next run reads this run's history, and saves.
	res.StoreError = causeLine(err)
	wf.GetLogger(ctx).Warn("tulip: the thread store did not take the run's state; the run completes, history holds it", "thread", ref.ThreadID, "error", res.StoreError)
	return nil
}

// threadState answers QueryThread. A run that has not loaded its thread's
// state (it failed or stopped before) answers with no agents: it left
// nothing of its own.
func (r *run) threadState() (*threadstate.Checkpoint, error) {
	if !r.ready {
		return &threadstate.Checkpoint{}, nil
	}
	if r.stateByRef {
		return r.handover(true)
	}
	return r.checkpoint(true)
}

// conversationPage answers QueryConversation: messages [From, To) that
// this run holds. To zero or past the end is the end; From past the end is
// an empty page whose Next is the conversation's length. QueryPage also
// says who holds the others.
func (r *run) conversationPage(rng threadstate.ConversationRange) (threadstate.ConversationPage, error) {
	if rng.From < 0 || rng.To < 0 {
		return threadstate.ConversationPage{}, fmt.Errorf("range [%d, %d): negative bounds", rng.From, rng.To)
	}
	if rng.From < r.base {
		return threadstate.ConversationPage{}, fmt.Errorf("messages [0, %d) are held by the thread's earlier runs: read them with the %s query", r.base, QueryPage)
	}
	p := r.pageMessages(threadstate.PageRequest{Kind: threadstate.PageMessages, From: rng.From, To: rng.To})
	return threadstate.ConversationPage{Messages: p.Messages, Next: p.Next}, nil
}

// shouldContinueAsNew: between responses, when Temporal suggests it or the
// run passed its own bounds (turns, history bytes).
func (r *run) shouldContinueAsNew(ctx wf.Context) bool {
	if !r.carriesThread || r.runTurns == 0 {
		return false
	}
	info := wf.GetInfo(ctx)
	turns, bytes := r.in.ContinueAfterTurns, r.in.ContinueAfterBytes
	if turns <= 0 {
		turns = DefaultContinueAfterTurns
	}
	if bytes <= 0 {
		bytes = DefaultContinueAfterBytes
	}
	return info.GetContinueAsNewSuggested() || r.runTurns >= turns || info.GetCurrentHistorySize() >= bytes
}

// causeLine is an activity failure's cause, one line: its application
// error's message, or the first line of the error.
func causeLine(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}
