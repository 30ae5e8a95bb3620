// Package runclient is the client side of tulip: start an agent run, wait for
// its answer or its interrupt, resume it, and read execution logs.
package runclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// RunOptions start an agent run.
type RunOptions struct {
	// TaskQueue of the worker running tulip. Required.
	TaskQueue string
	// Model names a model registered on the worker. Required.
	Model string
	// Agent names the agent. Zero value: "support".
	Agent string
	// ThreadID, when set, is the run's workflow ID: the run reloads the
	// thread's checkpoint, and a second concurrent run on it is refused
	// with *ThreadBusyError.
	ThreadID string
	// WorkflowID of a run without a thread. Zero value: "tulip-run-" and a
	// random suffix.
	WorkflowID string
	// Message is the user's message.
	Message string
	// Hooks installed at start, in order.
	Hooks []string
	// Tools names the worker tools and toolsets the run is offered
	// (agentrun.RunInput.Tools). Zero value: every tool.
	Tools []string
	// NoCompaction: the run never compacts (agentrun.RunInput).
	NoCompaction bool
	// MaxTurns bounds the model responses. Zero value: 32.
	MaxTurns int
	// Limits bound argument text. Zero value: 64 levels, 256 KiB.
	Limits dedup.Limits
	// SequentialCalls runs the calls of one model response one after
	// another. Zero value: they run at once.
	SequentialCalls bool
	// ContinueAfterTurns continues the run as new after this many model
	// turns in one workflow run (it also does when Temporal suggests it).
	// Zero value: 250.
	ContinueAfterTurns int
	// ContinueAfterBytes continues the run as new once its history is this
	// large. Zero value: 8 MiB.
	ContinueAfterBytes int
	// Stream chooses what the run streams (Temporal's Workflow Streams;
	// streams.Subscribe reads it). Zero value: every decision, and each
	// answer once the model returns.
	Stream *agentrun.StreamOptions
	// WorkflowExecutionTimeout bounds the whole run. Zero value: none.
	WorkflowExecutionTimeout time.Duration
	// WorkflowTaskTimeout bounds one workflow task (how soon a task lost
	// with its worker is retried). Zero value: Temporal's 10 s.
	WorkflowTaskTimeout time.Duration
	// Instructions are given to the model with every request of the run
	// (after the model's own system prompt).
	Instructions string
	// Params are the run's sampling parameters, each sent when set.
	Params *protocol.ModelParams
	// ClientTools are tools the caller runs (agentrun.RunInput.ClientTools):
	// a call the log does not serve interrupts the run (hook
	// agentrun.ClientToolsHook) until a resume brings its result.
	ClientTools []protocol.ToolSpec
	// ClientTimeout is agentrun.RunInput.ClientTimeout.
	ClientTimeout time.Duration
	// Fork makes the run a fork (Fork builds it): ThreadID must be a new
	// thread for a fork's first run.
	Fork *agentrun.ForkInput
}

// ThreadBusyError: a run is already open on the thread.
type ThreadBusyError struct {
	ThreadID string
	RunID    string
}

func (e *ThreadBusyError) Error() string {
	return fmt.Sprintf("thread %q already has an open run (%s); resume or finish it first", e.ThreadID, e.RunID)
}

// NotInterruptedError: a resume for a run that is closed.
type NotInterruptedError struct {
	WorkflowID string
}

func (e *NotInterruptedError) Error() string {
	return fmt.Sprintf("run %q is closed: there is nothing to resume", e.WorkflowID)
}

// RunFailedError: the run failed, or was terminated, timed out or
// cancelled. Result holds its trace and error when the run left them.
// Error is one line; the failure's type and the run's result stay here.
type RunFailedError struct {
	Result *agentrun.RunResult
	Err    error
}

// Type is the failure's stable type (protocol.ErrMaxTurns, ...), or ""
// when the run closed without one (terminated, timed out, cancelled).
func (e *RunFailedError) Type() string {
	var app *temporal.ApplicationError
	if errors.As(e.Err, &app) {
		return app.Type()
	}
	return ""
}

func (e *RunFailedError) Error() string {
	var app *temporal.ApplicationError
	var term *temporal.TerminatedError
	var timeout *temporal.TimeoutError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(e.Err, &app):
		return fmt.Sprintf("agent run failed (%s): %s", app.Type(), app.Message())
	case errors.As(e.Err, &term):
		return "agent run was terminated"
	case errors.As(e.Err, &timeout):
		return "agent run timed out"
	case errors.As(e.Err, &canceled):
		return "agent run was cancelled"
	}
	return "agent run failed: " + e.Err.Error()
}

func (e *RunFailedError) Unwrap() error { return e.Err }

// Handle identifies a started run: its workflow ID and the run ID it
// started with. A run that continues as new keeps its handle: Await,
// State, Log and Resume follow the chain.
type Handle struct {
	WorkflowID string
	RunID      string
}

// Input is the workflow input of a run with opts (what Start sends,
// before it learns whether a thread is new).
func Input(opts RunOptions) agentrun.RunInput {
	return agentrun.RunInput{Agent: opts.Agent, ThreadID: opts.ThreadID, Message: opts.Message, Model: opts.Model,
		Hooks: opts.Hooks, Tools: opts.Tools, NoCompaction: opts.NoCompaction, MaxTurns: opts.MaxTurns, Limits: opts.Limits, SequentialCalls: opts.SequentialCalls,
		ContinueAfterTurns: opts.ContinueAfterTurns, ContinueAfterBytes: opts.ContinueAfterBytes, Stream: opts.Stream,
		Instructions: opts.Instructions, Params: opts.Params, ClientTools: opts.ClientTools, ClientTimeoutMillis: opts.ClientTimeout.Milliseconds(), Fork: opts.Fork}
}

// Start starts an agent run and returns at once.
func Start(ctx context.Context, c client.Client, opts RunOptions) (Handle, error) {
	return start(ctx, c, opts, true)
}

// start starts a run; again allows one more try when a run appeared on a
// thread between its describe and its start.
func start(ctx context.Context, c client.Client, opts RunOptions, again bool) (Handle, error) {
	if opts.TaskQueue == "" {
		return Handle{}, &OptionError{Field: "TaskQueue"}
	}
	if opts.Model == "" {
		return Handle{}, &OptionError{Field: "Model"}
	}
	in := Input(opts)
	id := opts.WorkflowID
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	if opts.ThreadID != "" {
		id = opts.ThreadID
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			// No run under the ID: a new thread, if the server agrees at
			// the start (REJECT_DUPLICATE refuses it when a run closed
			// meanwhile). The run then skips the visibility listing and
			// its lag.
			in.NewThread, reuse = true, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
		case err != nil:
			return Handle{}, fmt.Errorf("agent: thread %q: %w", id, err)
		case opts.Fork != nil && opts.Fork.State != nil:
			return Handle{}, &ForkError{Thread: opts.Fork.Thread, Reason: fmt.Sprintf("thread %s has runs already: a fork starts a new thread", id)}
		case desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return Handle{}, &ThreadBusyError{ThreadID: id, RunID: desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()}
		default:
			in.PreviousRunID = desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		}
	} else if id == "" {
		id = randomID("tulip-run-")
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                opts.TaskQueue,
		WorkflowIDReusePolicy:    reuse,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// A run already open under the ID is an error, not a handle on
		// that run: without it the SDK hands a concurrent second start the
		// first request's run (and its answer).
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowExecutionTimeout:                 opts.WorkflowExecutionTimeout,
		WorkflowTaskTimeout:                      opts.WorkflowTaskTimeout,
		// The Web UI shows it (user metadata); the run's current details
		// then list its calls.
		StaticSummary: runSummary(in),
	}, agentrun.WorkflowName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) && in.NewThread && again {
			return start(ctx, c, opts, false) // a run started meanwhile: describe it
		}
		if errors.As(err, &started) {
			return Handle{}, &ThreadBusyError{ThreadID: id, RunID: started.RunId}
		}
		return Handle{}, fmt.Errorf("agent: start run: %w", err)
	}
	return Handle{WorkflowID: run.GetID(), RunID: run.GetRunID()}, nil
}

// runSummary is a run's summary for the Web UI: agent, model, thread.
func runSummary(in agentrun.RunInput) string {
	agent := in.Agent
	if agent == "" {
		agent = agentrun.DefaultAgent
	}
	s := fmt.Sprintf("tulip agent **%s** · model %s", agent, in.Model)
	if in.ThreadID != "" {
		s += " · thread " + in.ThreadID
	}
	return s
}

// Run starts an agent run and waits for its answer or its first interrupt
// (see Await).
func Run(ctx context.Context, c client.Client, opts RunOptions) (Handle, *agentrun.RunResult, error) {
	h, err := Start(ctx, c, opts)
	if err != nil {
		return h, nil, err
	}
	res, err := Await(ctx, c, h, "")
	return h, res, err
}

// PollInterval is how soon Await first asks the server whether a running
// run is interrupted (one DescribeWorkflowExecution: no worker, no history
// event); each later ask waits twice as long as the one before, up to
// MaxPollInterval. Runs the process's watch lists (WatchInterrupts) are
// asked about together, at the same pace, and each described only every
// WatchedPollInterval.
var PollInterval = 100 * time.Millisecond

// MaxPollInterval bounds the wait between Await's asks: an interrupt is
// seen at most this long after it is durable.
var MaxPollInterval = time.Second

// longestPoll is the longest wait between asks about a run the watch does
// not list, and between the watch's listings: MaxPollInterval, or
// PollInterval when that is longer.
func longestPoll() time.Duration { return max(MaxPollInterval, PollInterval) }

// Await waits until the run completes, fails, or is interrupted by an
// interrupt other than skip. A completed or interrupted run returns its
// result (Status tells which; Interrupt lists the held calls). A failed run
// returns its result, when it has one, and a *RunFailedError.
func Await(ctx context.Context, c client.Client, h Handle, skip string) (*agentrun.RunResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		res *agentrun.RunResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var res agentrun.RunResult
		err := c.GetWorkflow(ctx, h.WorkflowID, h.RunID).Get(ctx, &res)
		if err == nil {
			done <- outcome{res: &res}
			return
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.HasDetails() {
			var failed agentrun.RunResult
			derr := appErr.Details(&failed)
			if derr == nil {
				done <- outcome{res: &failed, err: &RunFailedError{Result: &failed, Err: err}}
				return
			}
			var keyErr *codec.KeyError
			if errors.As(derr, &keyErr) {
				done <- outcome{err: derr}
				return
			}
		}
		done <- outcome{err: &RunFailedError{Err: err}}
	}()
	var checked struct {
		run     string
		attempt int32
	}
	// ask describes the run: its interrupt, when the memo says one is
	// durable, and a workflow task that keeps failing. Unsure: the memo
	// names an interrupt the state did not show (yet).
	ask := func() (st *agentrun.RunResult, unsure bool, err error) {
		// The memo says the interrupt is durable; only then is the
		// state (held calls, trace) read, and a resume sure to find it.
		cur, id, attempt, err := interruptMemo(ctx, c, h)
		if err == nil && attempt >= 2 && (cur.RunID != checked.run || attempt != checked.attempt) {
			// A task retried: when the workers cannot replay the
			// run, waiting will not help. Each attempt's history is
			// read once.
			checked.run, checked.attempt = cur.RunID, attempt
			if nd := nondeterministic(ctx, c, cur); nd != nil {
				return nil, false, nd
			}
		}
		if err != nil || id == "" || id == skip {
			return nil, false, nil
		}
		st, err = stateOf(ctx, c, cur) // cur: the run the memo is of
		var keyErr *codec.KeyError
		if errors.As(err, &keyErr) {
			return nil, false, err // this client cannot read the run: waiting will not help
		}
		if err == nil && st.Status == agentrun.StatusInterrupted && st.Interrupt != nil &&
			(st.Interrupt.ID == id || (id == memoUnreadable && st.Interrupt.ID != skip)) {
			return st, false, nil
		}
		return nil, true, nil
	}
	// Watched, the run is described from WatchedPollInterval on: the
	// watch's listing sees its interrupt sooner. most is the longest wait
	// between describes: unwatched's, or the watch's while it lists.
	watched := watchRun(c, h.WorkflowID)
	defer watched.remove()
	unwatched := longestPoll()
	most := func() time.Duration {
		if watched.listing() {
			return max(WatchedPollInterval, unwatched)
		}
		return unwatched
	}
	wait := PollInterval
	if watched.listing() {
		wait = max(WatchedPollInterval, PollInterval)
	}
	tick := time.NewTimer(wait)
	defer tick.Stop()
	for {
		select {
		case o := <-done:
			return o.res, o.err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-watched.woken():
			if wait > most() {
				// The watch stopped answering: ask as an unwatched
				// run does.
				wait = PollInterval
				tick.Reset(wait)
			}
		case <-tick.C:
			wait = min(2*wait, most())
			tick.Reset(wait)
		}
		st, unsure, err := ask()
		if st != nil || err != nil {
			return st, err
		}
		if unsure && wait > unwatched {
			// Ask again as an unwatched run would.
			wait = unwatched
			tick.Reset(wait)
		}
	}
}

// interruptMemo reads the durable interrupt id ("" when none) of the
// newest run of h's continue-as-new chain, that run's handle, and the
// attempt of its pending workflow task (0: none pending, or not known).
// One describe answers when h's chain is the workflow ID's newest (the
// usual case): that description holds the newest run's memo.
func interruptMemo(ctx context.Context, c client.Client, h Handle) (Handle, string, int32, error) {
	cur, info, attempt, err := newestTask(ctx, c, h)
	if err != nil {
		return cur, "", 0, err
	}

	if info == nil { // a run of an older chain: read its own memo
		desc, err := c.DescribeWorkflowExecution(ctx, h.WorkflowID, h.RunID)
		if err != nil {
			return cur, "", 0, err
		}
		attempt = desc.GetPendingWorkflowTask().GetAttempt()
		info = desc.GetWorkflowExecutionInfo()
	}
	p := info.GetMemo().GetFields()[agentrun.MemoInterrupt]
	if p == nil {
		return cur, "", attempt, nil
	}
	var id string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &id); err != nil {
		// Written through the client's data converter, which this
		// package cannot reach: encrypted by a codec, say. The state
		// query (decoded by the client) decides alone.
		return cur, memoUnreadable, attempt, nil
	}
	return cur, id, attempt, nil
}

// memoUnreadable stands for an interrupt memo this package cannot decode.
const memoUnreadable = "\x00unreadable"

// current is the newest run of h's continue-as-new chain: the workflow ID's
// current run when that run's chain started with h.RunID, else h itself.
func current(ctx context.Context, c client.Client, h Handle) (Handle, error) {
	if h.RunID == "" {
		return h, nil
	}
	cur, _, err := newest(ctx, c, h)
	return cur, err
}

// newest describes the workflow ID's current run: when its chain is h's
// (it started with h.RunID, or h names no run), it returns that run and its
// description; else h and no description.
func newest(ctx context.Context, c client.Client, h Handle) (Handle, *workflowpb.WorkflowExecutionInfo, error) {
	cur, info, _, err := newestTask(ctx, c, h)
	return cur, info, err
}

// newestTask is newest with the attempt of the newest run's pending
// workflow task (0: none pending).
func newestTask(ctx context.Context, c client.Client, h Handle) (Handle, *workflowpb.WorkflowExecutionInfo, int32, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, h.WorkflowID, "")
	if err != nil {
		return h, nil, 0, err
	}
	info := desc.GetWorkflowExecutionInfo()
	if h.RunID != "" && info.GetFirstRunId() != h.RunID {
		return h, nil, 0, nil
	}
	return Handle{WorkflowID: h.WorkflowID, RunID: info.GetExecution().GetRunId()}, info, desc.GetPendingWorkflowTask().GetAttempt(), nil
}

// State queries a run's state so far (the newest run of its chain).
func State(ctx context.Context, c client.Client, h Handle) (*agentrun.RunResult, error) {
	h, err := current(ctx, c, h)
	if err != nil {
		return nil, err
	}
	return stateOf(ctx, c, h)
}

// stateOf queries the state of h's run itself.
func stateOf(ctx context.Context, c client.Client, h Handle) (*agentrun.RunResult, error) {
	v, err := queryState(ctx, c, h)
	if err != nil {
		return nil, err
	}
	var st agentrun.RunResult
	if err := v.Get(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Resume answers the run's interrupt by update. A resume with nothing to
// resume fails: the update's validator refuses it while the run is open
// (ApplicationError type protocol.ErrNotInterrupted, or ErrStaleInterrupt
// for an old interrupt id), and a closed run gives *NotInterruptedError.
// A resume delivered twice for the same interrupt takes effect once. The
// update goes to the workflow's newest run.
func Resume(ctx context.Context, c client.Client, workflowID string, in agentrun.ResumeInput) (agentrun.ResumeResult, error) {
	return ResumeRun(ctx, c, Handle{WorkflowID: workflowID}, in)
}

// ResumeRun is Resume for h's run (the newest of its continue-as-new
// chain; h with no run ID: the workflow's newest run): a thread that has
// gone on to another run since is not interrupted.
func ResumeRun(ctx context.Context, c client.Client, h Handle, in agentrun.ResumeInput) (agentrun.ResumeResult, error) {
	cur, info, err := newest(ctx, c, h)
	if err != nil {
		return agentrun.ResumeResult{}, fmt.Errorf("agent: resume %q: %w", h.WorkflowID, err)
	}
	if info == nil || info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return agentrun.ResumeResult{}, &NotInterruptedError{WorkflowID: h.WorkflowID}
	}
	type outcome struct {
		out agentrun.ResumeResult
		err error
	}
	updateID := randomID("resume-")
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		uh, err := c.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
			UpdateID:     updateID,
			WorkflowID:   cur.WorkflowID,
			RunID:        cur.RunID,
			UpdateName:   agentrun.UpdateResume,
			Args:         []any{in},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err != nil {
			done <- outcome{err: err}
			return
		}
		var out agentrun.ResumeResult
		err = uh.Get(uctx, &out)
		done <- outcome{out: out, err: err}
	}()
	closed := make(chan struct{})
	go func() {
		if runCloses(uctx, c, cur) {
			close(closed)
		}
	}()
	answer := func(o outcome) (agentrun.ResumeResult, error) {
		var nf *serviceerror.NotFound
		if errors.As(o.err, &nf) { // the run closed before the update reached it
			return agentrun.ResumeResult{}, &NotInterruptedError{WorkflowID: cur.WorkflowID}
		}
		return o.out, o.err
	}
	select {
	case o := <-done:
		return answer(o)
	case <-closed:
		// An update the run had not taken when it closed is dropped
		// with it, and its wait would last the server's poll timeout
		// (a minute): an answer sent twice, the second as the run
		// ended. One the run took is in its history, with its answer.
		took, err := updateAccepted(ctx, c, cur, updateID)
		if err != nil {
			return agentrun.ResumeResult{}, err
		}
		if !took {
			return agentrun.ResumeResult{}, &NotInterruptedError{WorkflowID: cur.WorkflowID}
		}
		select {
		case o := <-done:
			return answer(o)
		case <-ctx.Done():
			return agentrun.ResumeResult{}, ctx.Err()
		}
	}
}

// updateAccepted says whether h's closed run accepted the update id (its
// history has the update's accepted event).
func updateAccepted(ctx context.Context, c client.Client, h Handle, id string) (bool, error) {
	it := c.GetWorkflowHistory(ctx, h.WorkflowID, h.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false, fmt.Errorf("agent: resume %q: reading its history: %w", h.WorkflowID, err)
		}
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && (a.GetProtocolInstanceId() == id || a.GetAcceptedRequest().GetMeta().GetUpdateId() == id) {
			return true, nil
		}
	}
	return false, nil
}

// runCloses waits until h's run closes (true) or ctx ends (false). The
// wait is the server's long poll for the run's close, read without
// following a continue-as-new; the run's status confirms it.
func runCloses(ctx context.Context, c client.Client, h Handle) bool {
	for ctx.Err() == nil {
		var ignored any
		_ = c.GetWorkflow(ctx, h.WorkflowID, h.RunID).GetWithOptions(ctx, &ignored, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
		if ctx.Err() != nil {
			return false
		}
		desc, err := c.DescribeWorkflowExecution(ctx, h.WorkflowID, h.RunID)
		if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return false
}

// ResumeBySignal sends the same resume as a signal, for callers that cannot
// send updates. It must name the interrupt; an invalid signal is dropped by
// the run (signals cannot answer).
func ResumeBySignal(ctx context.Context, c client.Client, workflowID string, in agentrun.ResumeInput) error {
	if in.InterruptID == "" {
		return errors.New("agent: a resume signal must name its interrupt")
	}
	return c.SignalWorkflow(ctx, workflowID, "", agentrun.SignalResume, in)
}

// Log returns a run's execution log (open or closed; the newest run of its
// chain) by query, every record in full (records earlier runs hold are read
// from them).
func Log(ctx context.Context, c client.Client, h Handle) ([]dedup.Record, error) {
	h, err := current(ctx, c, h)
	if err != nil {
		return nil, err
	}
	v, err := c.QueryWorkflow(ctx, h.WorkflowID, h.RunID, agentrun.QueryLog)
	if err != nil {
		return nil, err
	}
	var recs []dedup.Record
	if err := v.Get(&recs); err != nil {
		return nil, err
	}
	if len(recs) > 0 && (recs[0].Thin() || hasResultIn(recs)) {
		st, err := State(ctx, c, h)
		if err != nil {
			return nil, err
		}
		return resolveRecords(ctx, c, h, st.Agent, recs)
	}
	return recs, nil
}

func hasResultIn(recs []dedup.Record) bool {
	for _, r := range recs {
		if r.ResultIn != nil && r.Result == nil {
			return true
		}
	}
	return false
}

// ThreadLog returns the execution log that agent left on a thread: the
// thread's state as its newest run holds it (open or closed, however it
// closed), as the next run on the thread would load it.
func ThreadLog(ctx context.Context, c client.Client, threadID, agent string) ([]dedup.Record, error) {
	cp, err := Thread(ctx, c, threadID)
	if err != nil {
		return nil, err
	}
	return LogOf(cp, agent)
}

// LogOf is the execution log agent ("": the default one) left in a
// thread's state (none: empty).
func LogOf(cp *threadstate.Checkpoint, agent string) ([]dedup.Record, error) {
	if agent == "" {
		agent = agentrun.DefaultAgent
	}
	if cp == nil {
		return []dedup.Record{}, nil
	}
	l, err := restoreOf(cp, agent)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return []dedup.Record{}, nil
	}
	return l.Records(), nil
}

// Thread returns a thread's state (its conversation and every agent's
// log), in full: the open run's, or what the next run on the thread would
// load, with what it holds by reference read from the runs that hold it.

func Thread(ctx context.Context, c client.Client, threadID string) (*threadstate.Checkpoint, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, threadID, "")
	if err != nil {
		return nil, fmt.Errorf("agent: thread %q: %w", threadID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	var cp *threadstate.Checkpoint
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := c.QueryWorkflow(ctx, threadID, info.GetExecution().GetRunId(), agentrun.QueryThread)
		if err != nil {
			return nil, err
		}
		cp = &threadstate.Checkpoint{}
		if err := v.Get(cp); err != nil {
			return nil, err
		}
		if cp.Run == "" {
			cp.Run = info.GetExecution().GetRunId()
		}
	} else {
		// The current run is the newest: no listing, no lag.
		cp, err = threadstate.TemporalCheckpointer{Client: c}.Load(ctx,
			threadstate.ThreadRef{ThreadID: threadID, PreviousRunID: info.GetExecution().GetRunId()})
		if err != nil {
			return nil, err
		}
	}
	full, err := threadstate.ResolveCheckpoint(ctx, c, threadID, cp)
	if err != nil || full == nil {
		return full, err
	}
	return full, threadstate.ResolveContent(full.Messages)
}

// Kind is the error's tulip kind (tulip.KindOf reads it).
func (e *ThreadBusyError) Kind() tulip.ErrorKind { return tulip.ThreadBusy }

// Kind is the error's tulip kind.
func (e *NotInterruptedError) Kind() tulip.ErrorKind { return tulip.NotInterrupted }

// Kind is the failure's tulip kind: its type when tulip raised it, else
// tulip.RunFailed.
func (e *RunFailedError) Kind() tulip.ErrorKind {
	if k := tulip.KindOf(e.Err); k != "" {
		return k
	}
	return tulip.RunFailed
}

// OptionError is a required option left unset (kind tulip.BadInput).
type OptionError struct{ Field string }

func (e *OptionError) Error() string { return "agent: Options." + e.Field + " is required" }

// Kind is the error's tulip kind.
func (e *OptionError) Kind() tulip.ErrorKind { return tulip.BadInput }

// TestEnvError is an option the SDK's test environment cannot serve
// (kind tulip.BadInput): Why says what to use instead.
type TestEnvError struct{ Field, Why string }

func (e *TestEnvError) Error() string {
	return "agent: RunTest: Options." + e.Field + ": " + e.Why
}

// Kind is the error's tulip kind.
func (e *TestEnvError) Kind() tulip.ErrorKind { return tulip.BadInput }

// queryState queries a run's state. A query that fails in the worker
// (serviceerror.QueryFailed) is asked again, twice, a moment apart: one
// that reaches a worker while the run's workflow task is being settled
// can fail transiently (the SDK's "lookup failed for scheduledEventID"),
// as a second answer to an approval racing the first one's saw.
func queryState(ctx context.Context, c client.Client, h Handle) (converter.EncodedValue, error) {
	for attempt := 0; ; attempt++ {
		v, err := c.QueryWorkflow(ctx, h.WorkflowID, h.RunID, agentrun.QueryState)
		var qf *serviceerror.QueryFailed
		if err == nil || !errors.As(err, &qf) || attempt == 2 {
			return v, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// randomID is prefix followed by 16 random hex digits.
func randomID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
