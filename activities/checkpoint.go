package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/codec"
)

// Checkpoint is a thread's state between runs: its conversation and each
// agent's execution log (a dedup snapshot). Agents never see each other's
// records; every agent on the thread sees the whole conversation.
type Checkpoint struct {
	// Agents holds each agent's execution log as a dedup snapshot.
	Agents map[string]json.RawMessage `json:"agents"`
	// Messages is the thread's conversation: user messages, assistant
	// messages with their tool calls, tool results.
	Messages []Message `json:"messages,omitempty"`
}

// ThreadRef names the thread a run belongs to.
type ThreadRef struct {
	// ThreadID is the thread, which is also the run's workflow ID.
	ThreadID string `json:"thread_id"`
	// RunID is the loading run's own run ID.
	RunID string `json:"run_id"`
	// PreviousRunID is a hint: the thread's last closed run, when the
	// client that started the run knew it. Without it the loader finds
	// the thread's runs itself.
	PreviousRunID string `json:"previous_run_id,omitempty"`
}

// Checkpointer loads and saves thread checkpoints. Both run in activities.
type Checkpointer interface {
	Load(ctx context.Context, ref ThreadRef) (*Checkpoint, error)
	Save(ctx context.Context, ref ThreadRef, cp *Checkpoint) error
}

// RunOutcome is the part of an agent run's result a Checkpointer needs. It
// mirrors the workflow result's JSON.
type RunOutcome struct {
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// StartInput is the part of an agent run's input that names the previous
// run its client knew of.
type StartInput struct {
	PreviousRunID string `json:"previous_run_id,omitempty"`
}

// TemporalCheckpointer keeps checkpoints in Temporal itself, so that any
// client that starts a run on a thread (workflow ID = thread ID) continues
// it. Load finds the thread's runs (the hint first, then the namespace's
// visibility store, newest first) and takes the state the newest run that
// ever ran left behind:
//   - a completed run's result, or a failed run's failure details, carry it
//     (the fast path);
//   - any other run (terminated, timed out, cancelled, failed without
//     details) is asked by query (QueryThread): a worker replays its
//     history and answers with every record that history proves.
//
// A run that never completed a workflow task left nothing and is stepped
// over. Save does nothing.
type TemporalCheckpointer struct {
	// Client reads the runs. Zero value: the activity's own client.
	Client client.Client
	// MaxSkip bounds how many runs are looked at. Zero value: 100.
	MaxSkip int
}

// Load implements Checkpointer.
func (t TemporalCheckpointer) Load(ctx context.Context, ref ThreadRef) (*Checkpoint, error) {
	c := t.Client
	if c == nil {
		c = activity.GetClient(ctx)
	}
	limit := t.MaxSkip
	if limit <= 0 {
		limit = 100
	}
	runs, err := threadRuns(ctx, c, ref, limit)
	if err != nil {
		return nil, err
	}
	for _, run := range runs {
		cp, ran, err := loadRun(ctx, c, ref.ThreadID, run)
		if err != nil {
			return nil, temporal.NewApplicationErrorWithCause(
				fmt.Sprintf("thread %s: reading run %s: %v", ref.ThreadID, run, err), ErrCheckpoint, err)
		}
		if ran {
			return cp, nil
		}
	}
	return nil, nil
}

// Save implements Checkpointer: the run's result is the checkpoint.
func (TemporalCheckpointer) Save(context.Context, ThreadRef, *Checkpoint) error { return nil }

// threadRuns lists the thread's runs other than ref.RunID, newest first:
// the hint, then what visibility knows.
func threadRuns(ctx context.Context, c client.Client, ref ThreadRef, limit int) ([]string, error) {
	type run struct {
		id    string
		start int64
	}
	var found []run
	var token []byte
	query := "WorkflowId = " + quote(ref.ThreadID)
	for len(found) < limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 50, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("thread %s: listing its runs: %w", ref.ThreadID, err)
		}
		for _, e := range resp.GetExecutions() {
			if id := e.GetExecution().GetRunId(); id != ref.RunID && id != ref.PreviousRunID {
				found = append(found, run{id, e.GetStartTime().AsTime().UnixNano()})
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if ref.PreviousRunID != "" {
		// The hint takes its place by start time: a run that started
		// after the client read it is newer.
		start := int64(1<<63 - 1)
		if d, err := c.DescribeWorkflowExecution(ctx, ref.ThreadID, ref.PreviousRunID); err == nil {
			start = d.GetWorkflowExecutionInfo().GetStartTime().AsTime().UnixNano()
		}
		found = append(found, run{ref.PreviousRunID, start})
	}
	slices.SortStableFunc(found, func(a, b run) int { return cmp.Compare(b.start, a.start) })
	var out []string
	for _, r := range found {
		out = append(out, r.id)
	}
	return out, nil
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// loadRun reads the thread state run left behind. ran is false when the run
// never completed a workflow task (it left nothing).
func loadRun(ctx context.Context, c client.Client, workflowID, runID string) (cp *Checkpoint, ran bool, err error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, false, nil // deleted by retention: nothing to read
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
		if err != nil && errors.As(err, &appErr) {
			switch appErr.Type() {
			case ErrBadInput, ErrUnknownHook:
				return nil, false, nil // refused before it ran: it left nothing
			}
			if appErr.HasDetails() {
				if derr := appErr.Details(&out); errors.As(derr, &keyErr) {
					return nil, true, derr
				}
			}
		}
		if out.Checkpoint != nil {
			return out.Checkpoint, true, nil
		}
	}
	ran, err = completedATask(ctx, c, workflowID, runID)
	if err != nil || !ran {
		return nil, false, err
	}
	v, err := c.QueryWorkflow(ctx, workflowID, runID, QueryThread)
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

// Checkpoints holds the checkpoint activities of a worker.
type Checkpoints struct {
	Checkpointer Checkpointer
}

// Load is the LoadCheckpointActivity function.
func (c Checkpoints) Load(ctx context.Context, ref ThreadRef) (*Checkpoint, error) {
	cp, err := c.Checkpointer.Load(ctx, ref)
	if err != nil {
		return nil, err
	}
	if cp == nil {
		cp = &Checkpoint{}
	}
	return cp, nil
}

// Save is the SaveCheckpointActivity function.
func (c Checkpoints) Save(ctx context.Context, ref ThreadRef, cp *Checkpoint) error {
	return c.Checkpointer.Save(ctx, ref, cp)
}
