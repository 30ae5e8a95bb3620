package threadstate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// Checkpoint is a thread's state between runs: its conversation and each
// agent's execution log (a dedup snapshot). Agents never see each other's
// records; every agent on the thread sees the whole conversation.
//
// Runs write it by reference: Conversation names the runs whose histories
// hold the messages, and the logs' records are thin (dedup.Record.Thin:
// arguments as a hash, large results as a message number), so its size
// grows with the number of calls, not with their content. Messages then
// holds only the messages after Conversation's, in full. A Checkpoint
// without Conversation (written before runs carried state by reference, or
// by a custom Checkpointer) holds the whole conversation in Messages and
// full records.
type Checkpoint struct {
	// Agents holds each agent's execution log as a dedup snapshot.
	Agents map[string]json.RawMessage `json:"agents"`
	// Messages is the conversation, in full: all of it, or what follows
	// Conversation's messages.
	Messages []Message `json:"messages,omitempty"`
	// Conversation is the conversation's first messages, by reference.
	Conversation *ConversationRef `json:"conversation,omitempty"`
	// Run is the workflow run whose state this is.
	Run string `json:"run,omitempty"`
	// Minted is, per agent, where the count in its next downstream key of
	// a tool that is not idempotent starts: past every count its runs on
	// the thread used, including those of executions no record holds (held
	// calls a resume performed, calls still executing when a run stopped).
	// Absent for an agent whose log's length is past that already (and in
	// states written before it): the count then starts at that length.
	Minted map[string]int `json:"minted,omitempty"`
	// Usage is the thread's token counts through this state: every model
	// response of every run and agent on it. Absent when none reported
	// any (and in states written before it: counted from then on).
	Usage *Usage `json:"usage,omitempty"`
	// UsageByModel is Usage per model: the name the runs asked their
	// worker for (RunInput.Model).
	UsageByModel map[string]*Usage `json:"usage_by_model,omitempty"`
	// Fork, on a thread made by a fork, names the thread it was forked
	// from and where (docs/forks.md). Absent on any other thread.
	Fork *ForkOf `json:"fork,omitempty"`
	// Performed lists, per agent, the held calls a resume performed
	// (approved): they ran, and by the contract no record holds them
	// (docs/rules.md), so a fork of the thread serves them from here
	// (docs/forks.md). Absent when there are none (and in states written
	// before it).
	Performed map[string][]PerformedCall `json:"performed,omitempty"`
	// Context is the model's view of the conversation (compaction,
	// docs/context.md): the summary sent in place of its first messages,
	// and the last model call's measure. Absent while nothing was
	// compacted nor measured (and in states written before it). The
	// conversation itself stays whole.
	Context *ContextState `json:"context,omitempty"`
}

// ContextState is a thread's compaction: the model is sent Summary in
// place of messages [0, Upto) (Upto 0: nothing compacted), and the last
// model call sent Sent tokens of a budget of Budget when the conversation
// had At messages.
type ContextState struct {
	Upto        int    `json:"upto,omitempty"`
	Summary     string `json:"summary,omitempty"`
	Budget      int    `json:"budget,omitempty"`
	Sent        int    `json:"sent,omitempty"`
	At          int    `json:"at,omitempty"`
	Compactions int    `json:"compactions,omitempty"`
}

// PerformedCall is a held call a resume performed: it ran (once) outside
// the execution log. Its result is the content of the conversation's
// message Message (its tool message), or Error.
type PerformedCall struct {
	// Response is the model response (1-based, across the thread) that
	// made the call.
	Response int    `json:"response"`
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	// Arguments are the arguments it ran with (after the hooks).
	Arguments string `json:"arguments"`
	// Message is the number of its tool message in the conversation
	// (counted from 0 across the thread's runs).
	Message int `json:"message"`
	// Error is the call's final error, when it failed.
	Error *dedup.ToolError `json:"error,omitempty"`
	// Key is the downstream idempotency key it ran with.
	Key string `json:"key,omitempty"`
}

// ForkOf is where a forked thread came from: its origin thread, and the
// model response (1-based) the fork replaced.
type ForkOf struct {
	Thread string `json:"thread"`
	At     int    `json:"at"`
	// Live: the fork runs the calls its origin never made.
	Live bool `json:"live,omitempty"`
}

// ConversationRef is a conversation by reference: its length, its digest
// (ExtendDigest), and which run holds which of its messages. A reader pages
// the messages from those runs (QueryPage), closed runs included.
type ConversationRef struct {
	Count  int    `json:"count"`
	Digest string `json:"digest"`
	// Parts hold messages [0, Count) in order.
	Parts []Part `json:"parts"`
}

// Part says which run holds the messages [From, To).
type Part struct {
	Run  string `json:"run"`
	From int    `json:"from"`
	To   int    `json:"to"`
}

// ThreadRef names the thread a run belongs to.
type ThreadRef struct {
	// ThreadID is the thread, which is also the run's workflow ID.
	ThreadID string `json:"thread_id"`
	// RunID is the loading run's own run ID.
	RunID string `json:"run_id"`
	// PreviousRunID is a hint: the thread's last closed run, when the
	// client that started the run knew it. The loader reads it first and
	// lists the thread's runs only if it left nothing. Without it the
	// loader finds the thread's runs itself.
	PreviousRunID string `json:"previous_run_id,omitempty"`
	// NewThread: the client proved the thread has no earlier run
	// (RunInput.NewThread); nothing is listed.
	NewThread bool `json:"new_thread,omitempty"`
	// Started is when the loading run started (its workflow start time).
	Started time.Time `json:"started,omitempty"`
}

// LoadedThread is what LoadThreadActivity returns to a run.
type LoadedThread struct {
	// State is the thread's state (nil for a new thread).
	State *Checkpoint `json:"state,omitempty"`
	// Save: the worker's Checkpointer keeps states itself, so the run
	// saves its state at its end (SaveThreadActivity).
	Save bool `json:"save,omitempty"`
}

// Checkpointer loads and saves thread checkpoints. Both run in activities.
type Checkpointer interface {
	Load(ctx context.Context, ref ThreadRef) (*Checkpoint, error)
	Save(ctx context.Context, ref ThreadRef, cp *Checkpoint) error
}

// RunOutcome is the part of an agent run's result a Checkpointer needs. It
// mirrors the workflow result's JSON: State (runs that carry state by
// reference) or Checkpoint (runs before them).
type RunOutcome struct {
	State      *Checkpoint `json:"state,omitempty"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

func (o RunOutcome) state() *Checkpoint {
	if o.State != nil {
		return o.State
	}
	return o.Checkpoint
}

// StartInput is the part of an agent run's input that names the previous
// run its client knew of.
type StartInput struct {
	PreviousRunID string `json:"previous_run_id,omitempty"`
}

// DefaultVisibilityLag is TemporalCheckpointer's VisibilityLag zero value.
const DefaultVisibilityLag = 2 * time.Second

// TemporalCheckpointer keeps checkpoints in Temporal itself, so that any
// client that starts a run on a thread (workflow ID = thread ID) continues
// it. Load finds the thread's newest run that ever ran and takes the state
// it left behind:
//   - a completed run's result, or a failed run's failure details, carry it
//     (the fast path);
//   - any other run (terminated, timed out, cancelled, failed without
//     details) is asked by query (QueryThread): a worker replays its
//     history and answers with every record that history proves.
//
// Every read of a run is strongly consistent (describe, result, history,
// query by workflow and run ID). Only finding the newest run may need the
// namespace's visibility store, which is eventually consistent: a run that
// closed moments ago may not be listed yet. So a start that names the
// previous run (ThreadRef.PreviousRunID, which agent.Start fills from a
// describe just before it starts) uses it, and a start that does not waits
// until VisibilityLag has passed since it started before it lists: every
// run that closed before it started is then listed, and it never loads an
// older state than the newest. A run that never completed a workflow task
// left nothing and is stepped over. Save does nothing.
type TemporalCheckpointer struct {
	// Client reads the runs. Zero value: the activity's own client.
	Client client.Client
	// MaxSkip bounds how many runs are looked at. Zero value: 100.
	MaxSkip int
	// VisibilityLag bounds how far the namespace's visibility store lags
	// behind a run's close (about a second with Elasticsearch, less with
	// SQL): how long a start with no previous_run_id waits, from its own
	// start, before it lists the thread's runs. Zero value:
	// DefaultVisibilityLag. Negative: no wait (a start within the store's
	// lag may then load a state older than the newest).
	VisibilityLag time.Duration
	// List lists the thread's runs, newest first by start time, for a
	// start without a hint. Zero value: the visibility store
	// (ListWorkflow with WorkflowId = the thread). Tests set it to model a
	// lagging store.
	List func(ctx context.Context, c client.Client, threadID string) ([]RunInfo, error)
	// Store keeps each thread's newest state, in full, outside history:
	// every run saves its state there at its end, and a load reads it when
	// the runs that hold the thread's state are gone (the namespace's
	// retention deleted them). A DirStore, or any Checkpointer over your
	// own database. Zero value: none; a thread whose runs are gone then
	// fails its next run with ErrThreadLost (docs/threads.md).
	Store Checkpointer
}

// RunInfo is one run of a thread as a listing shows it.
type RunInfo struct {
	RunID string
	Start time.Time
}

// Load implements Checkpointer. The thread's state comes from its runs'
// histories; when they cannot give it (the newest run, or a run holding
// part of its state, is gone), from Store, and without a Store that keeps
// the thread the load fails with ErrThreadLost. A thread whose runs are all
// gone looks new: Store's state is taken when it has one.
func (t TemporalCheckpointer) Load(ctx context.Context, ref ThreadRef) (*Checkpoint, error) {
	c := t.Client
	if c == nil {
		c = activity.GetClient(ctx)
	}
	cp, err := t.fromHistory(ctx, c, ref)
	var gone *goneRun
	if err != nil && !errors.As(err, &gone) {
		return nil, err
	}
	if cp != nil {
		run, err := missingRun(ctx, c, ref.ThreadID, cp)
		if err != nil {
			return nil, err
		}
		if run == "" {
			return cp, nil
		}
		gone = &goneRun{run: run}
	}
	if t.Store != nil {
		head, err := t.Store.Load(ctx, ref)
		var bad *EntryError
		if errors.As(err, &bad) {
			// History does not hold the state and the store's entry
			// cannot be read: fail now (a retry reads the same bytes).
			return nil, unreadable(ref.ThreadID, bad)
		}
		if err != nil {
			return nil, fmt.Errorf("thread %s: thread store: %w", ref.ThreadID, err)
		}
		switch {
		case head == nil:
		case cp == nil || head.Run == cp.Run:
			return head, nil
		default:
			// History holds a newer state than the store (a run that
			// saved nothing: terminated, timed out): take it, reading
			// from the store only what the deleted runs held.
			full, err := ResolveCheckpointWithStored(ctx, c, ref.ThreadID, cp, head)
			if err == nil {
				return full, nil
			}
			if !deleted(err) {
				return nil, err
			}
		}
	}
	if gone != nil {
		return nil, threadLost(ref.ThreadID, gone.run)
	}
	return nil, nil
}

// fromHistory finds the thread's newest run that left a state and reads
// it: nil for a thread with none; a *goneRun when the run it had to read
// was deleted.
func (t TemporalCheckpointer) fromHistory(ctx context.Context, c client.Client, ref ThreadRef) (*Checkpoint, error) {
	limit := t.MaxSkip
	if limit <= 0 {
		limit = 100
	}
	runs, ok := listedBefore(ctx, ref)
	skip := ""
	if !ok {
		if ref.PreviousRunID != "" {
			// The start named the thread's last closed run (agent.Start
			// read it just before): read it, and list the thread's runs
			// only if it left nothing. A hinted load needs no visibility
			// store, which a busy server answers slowest (a listing took
			// over 50 s in a soak).
			if cp, ran, err := readRun(ctx, c, ref.ThreadID, ref.PreviousRunID); err != nil || ran {
				return cp, err
			}
			skip = ref.PreviousRunID
		}
		var err error
		if runs, err = t.threadRuns(ctx, c, ref, limit); err != nil {
			return nil, err
		}
		if note, ok := ctx.Value(noteKey{}).(func(any)); ok {
			note(listed{Thread: ref.ThreadID, Run: ref.RunID, Runs: runs})
		}
	}
	for _, run := range runs {
		if run == skip {
			continue // read above: it left nothing
		}
		if cp, ran, err := readRun(ctx, c, ref.ThreadID, run); err != nil || ran {
			return cp, err
		}
	}
	return nil, nil
}

// readRun is loadRun for a thread load: the state names the run it came
// from, and a run that cannot be read is the load's error.
func readRun(ctx context.Context, c client.Client, threadID, runID string) (*Checkpoint, bool, error) {
	cp, ran, err := loadRun(ctx, c, threadID, runID)
	var gone *goneRun
	if errors.As(err, &gone) {
		return nil, false, err
	}
	if err != nil {
		return nil, false, temporal.NewApplicationErrorWithCause(
			fmt.Sprintf("thread %s: reading run %s: %v", threadID, runID, err), protocol.ErrCheckpoint, err)
	}
	if ran && cp != nil && cp.Run == "" {
		cp.Run = runID
	}
	return cp, ran, nil
}

// Save implements Checkpointer: the run's result is the checkpoint, and
// Store, when there is one, keeps it too (in full).
func (t TemporalCheckpointer) Save(ctx context.Context, ref ThreadRef, cp *Checkpoint) error {
	if t.Store == nil {
		return nil
	}
	return t.Store.Save(ctx, ref, cp)
}

// threadRuns lists the thread's runs other than ref.RunID, newest first:
// the hint, then what visibility knows (after the lag, without a hint).
func (t TemporalCheckpointer) threadRuns(ctx context.Context, c client.Client, ref ThreadRef, limit int) ([]string, error) {
	if ref.NewThread && ref.PreviousRunID == "" {
		return nil, nil
	}
	// The hint (a run that left nothing) takes its place by start time: a
	// run that started after the client read it is newer.
	hintStart := time.Unix(1<<40, 0)
	// Every run that closed before `since` is listed once the store's lag
	// has passed since then: the loading run's start or, after a hint that
	// left nothing, the hint's (it started after the run before it closed).
	since := ref.Started
	if ref.PreviousRunID != "" {
		if d, err := c.DescribeWorkflowExecution(ctx, ref.ThreadID, ref.PreviousRunID); err == nil {
			hintStart = d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
			if since.IsZero() || hintStart.Before(since) {
				since = hintStart
			}
		}
	}
	if t.VisibilityLag >= 0 && !since.IsZero() {
		lag := t.VisibilityLag
		if lag == 0 {
			lag = DefaultVisibilityLag
		}
		if err := sleepUntil(ctx, since.Add(lag)); err != nil {
			return nil, err
		}
	}
	list := t.List
	if list == nil {
		list = func(ctx context.Context, c client.Client, threadID string) ([]RunInfo, error) {
			return listRuns(ctx, c, threadID, limit)
		}
	}
	listed, err := list(ctx, c, ref.ThreadID)
	if err != nil {
		return nil, fmt.Errorf("thread %s: listing its runs: %w", ref.ThreadID, err)
	}
	var found []RunInfo
	for _, r := range listed {
		if r.RunID != ref.RunID && r.RunID != ref.PreviousRunID {
			found = append(found, r)
		}
	}
	if ref.PreviousRunID != "" {
		found = append(found, RunInfo{RunID: ref.PreviousRunID, Start: hintStart})
	}
	slices.SortStableFunc(found, func(a, b RunInfo) int { return cmp.Compare(b.Start.UnixNano(), a.Start.UnixNano()) })
	var out []string
	for _, r := range found {
		out = append(out, r.RunID)
	}
	return out, nil
}

// listed is what a thread load's heartbeats carry once it has its list of
// the thread's runs: a later attempt (after its worker died, say) takes
// the list from there instead of listing again. The list cannot go stale:
// while the run is open no other run of its workflow ID starts, and every
// run that closed before it started was in the list.
type listed struct {
	Thread string   `json:"thread"`
	Run    string   `json:"run"`
	Runs   []string `json:"runs"`
}

// noteKey carries, in LoadThread's context, the function that puts details
// on the activity's heartbeats.
type noteKey struct{}

// WithListingNote is ctx carrying note, the function that puts details on
// the calling activity's heartbeats: TemporalCheckpointer.Load notes its
// list of the thread's runs there, for a later attempt (listedBefore).
func WithListingNote(ctx context.Context, note func(any)) context.Context {
	return context.WithValue(ctx, noteKey{}, note)
}

// listedBefore is the list an earlier attempt of this activity found for
// ref, from its heartbeat details.
func listedBefore(ctx context.Context, ref ThreadRef) ([]string, bool) {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return nil, false
	}
	var l listed
	if activity.GetHeartbeatDetails(ctx, &l) != nil || l.Thread != ref.ThreadID || l.Run != ref.RunID {
		return nil, false
	}
	return l.Runs, true
}

// sleepUntil waits until t.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// ListTimeout bounds one page of a thread's run listing inside an
// activity (the activity's own deadline bounds it first). The SDK's
// client.ListWorkflow gives every call at most 10 s: a visibility store
// that answers slower under load (a busy SQLite server took over 10 s for
// a one-thread listing in a soak) failed every attempt of the run's thread
// load, until its retry window closed and the run failed. Inside an
// activity (which heartbeats while it waits) a listing may take this long.
const ListTimeout = 50 * time.Second

// listRuns lists a workflow ID's runs from the visibility store.
func listRuns(ctx context.Context, c client.Client, workflowID string, limit int) ([]RunInfo, error) {
	var out []RunInfo
	var token []byte
	query := "WorkflowId = " + quote(workflowID)
	for len(out) < limit {
		resp, err := listPage(ctx, c, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 50, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, RunInfo{RunID: e.GetExecution().GetRunId(), Start: e.GetStartTime().AsTime()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return out, nil
}

// listPage lists one page. Inside an activity it calls the service
// directly, in the activity's namespace, with ListTimeout (or the
// activity's deadline, if sooner) for its deadline; elsewhere (a client
// reading a thread) it is client.ListWorkflow.
func listPage(ctx context.Context, c client.Client, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if !activity.IsActivity(ctx) {
		return c.ListWorkflow(ctx, req)
	}
	ctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	req.Namespace = activity.GetInfo(ctx).WorkflowNamespace
	return c.WorkflowService().ListWorkflowExecutions(ctx, req)
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// loadRun reads the thread state run left behind. ran is false when the run
// left nothing: it never completed a workflow task, or it stopped before it
// had its thread's state.
func loadRun(ctx context.Context, c client.Client, workflowID, runID string) (cp *Checkpoint, ran bool, err error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, false, &goneRun{run: runID} // deleted (retention): its state is not here to read
		}
		return nil, false, err
	}
	switch desc.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		var out RunOutcome
		err := c.GetWorkflow(ctx, workflowID, runID).GetWithOptions(ctx, &out, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
		var keyErr *codec.KeyError
		if errors.As(err, &keyErr) {
			return nil, true, err // encrypted with a key this client lacks: say so
		}
		var appErr *temporal.ApplicationError
		if err != nil && errors.As(err, &appErr) && appErr.HasDetails() {
			// A failed run's details hold its state, whatever its type;
			// details with none are a run refused before it had its
			// thread's state: it left nothing.
			if derr := appErr.Details(&out); errors.As(derr, &keyErr) {
				return nil, true, derr
			} else if derr == nil && out.state() == nil {
				return nil, false, nil
			}
		}
		if st := out.state(); st != nil {
			return st, true, nil
		}
	}
	ran, err = completedATask(ctx, c, workflowID, runID)
	if err != nil || !ran {
		return nil, false, err
	}
	v, err := c.QueryWorkflow(ctx, workflowID, runID, protocol.QueryThread)
	if err != nil {
		return nil, true, err // retryable: the run's records are there to be read
	}
	cp = &Checkpoint{}
	if err := v.Get(cp); err != nil {
		return nil, true, err
	}
	if cp.Agents == nil {
		return nil, false, nil // it stopped before it had its thread's state
	}
	return cp, true, nil
}

// completedATask reports whether a run's history holds a completed workflow
// task: only then can workflow code have recorded anything.
func completedATask(ctx context.Context, c client.Client, workflowID, runID string) (bool, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false, err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true, nil
		}
	}
	return false, nil
}

// PreviousRunOf reads the previous run a run's client named in its start
// input ("" when it named none). dc decodes the input: the client's data
// converter (nil: the SDK's default).
func PreviousRunOf(ctx context.Context, c client.Client, dc converter.DataConverter, workflowID, runID string) (string, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return "", errors.New("empty history")
	}
	ev, err := it.Next()
	if err != nil {
		return "", err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || attrs.GetInput() == nil || len(attrs.GetInput().GetPayloads()) == 0 {
		return "", errors.New("no start input")
	}
	var in StartInput
	if err := dc.FromPayload(attrs.GetInput().GetPayloads()[0], &in); err != nil {
		return "", err
	}
	return in.PreviousRunID, nil
}

// ResolveCheckpoint returns cp in full: its conversation's messages and its
// logs' records read from the runs (of workflowID) that hold them, records'
// content references filled in (a message that refers to an earlier one,
// ContentIn, stays so: ResolveContent fills it in). A checkpoint that holds everything already is
// returned as it is.
func ResolveCheckpoint(ctx context.Context, c client.Client, workflowID string, cp *Checkpoint) (*Checkpoint, error) {
	return ResolveCheckpointWithStored(ctx, c, workflowID, cp, nil)
}

// ResolveCheckpointWithStored is ResolveCheckpoint that reads what a deleted run
// held from stored, a state in full from the thread's store, when it has
// it (its messages proven by the conversation's digest).
func ResolveCheckpointWithStored(ctx context.Context, c client.Client, workflowID string, cp, stored *Checkpoint) (*Checkpoint, error) {
	if cp == nil {
		return nil, nil
	}
	var storedMsgs []Message
	storedRecs := map[string][]dedup.Record{}
	if stored != nil && stored.Conversation == nil {
		storedMsgs = stored.Messages
		for name, snap := range stored.Agents {
			if l, err := dedup.Restore(snap); err == nil {
				storedRecs[name] = l.Records()
			}
		}
	}
	out := &Checkpoint{Agents: map[string]json.RawMessage{}, Run: cp.Run, Minted: maps.Clone(cp.Minted), Usage: cp.Usage.Plus(nil),
		UsageByModel: CloneUsage(cp.UsageByModel), Fork: cp.Fork, Performed: cp.Performed, Context: cp.Context}
	msgs := cp.Messages
	if cv := cp.Conversation; cv != nil && cv.Count > 0 {
		head, err := FetchMessagesWithStored(ctx, c, workflowID, cp.Run, 0, cv.Count, storedMsgs)
		if err != nil {
			return nil, err
		}
		if storedMsgs != nil && ExtendDigest("", head...) != cv.Digest {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("thread %s: its conversation (%d messages, some from the thread store) does not match its digest", workflowID, len(head)), protocol.ErrConversation, nil)
		}
		msgs = append(head, msgs...)
	}
	// The state keeps its messages as the runs wrote them (a served result
	// refers to the message that holds it, ContentIn), so a run that adopts
	// it extends the same digests; records take their content from a
	// resolved copy.
	out.Messages = slices.Clone(msgs)
	msgs = slices.Clone(msgs)
	if err := ResolveContent(msgs); err != nil {
		return nil, err
	}
	for name, snap := range cp.Agents {
		l, err := dedup.Restore(snap)
		if err != nil {
			return nil, err
		}
		recs := l.Records()
		thin := 0
		for thin < len(recs) && recs[thin].Thin() {
			thin++
		}
		if thin > 0 {
			full, err := fetchRecords(ctx, c, workflowID, cp.Run, name, 0, thin, storedRecs[name])
			if err != nil {
				return nil, err
			}
			copy(recs, full)
		}
		for i := range recs {
			if in := recs[i].ResultIn; in != nil {
				if *in < 0 || *in >= len(msgs) {
					return nil, fmt.Errorf("record %d of %s: its result is in message %d of %d", i, name, *in, len(msgs))
				}
				recs[i].Result, recs[i].ResultIn = json.RawMessage(msgs[*in].Content), nil
			}
		}
		fl, err := dedup.FromRecords(l.Response(), recs)
		if err != nil {
			return nil, err
		}
		b, err := fl.Snapshot()
		if err != nil {
			return nil, err
		}
		out.Agents[name] = b
	}
	return out, nil
}
