package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// Checkpoint is a thread's saved state: each agent's execution log, as a
// dedup snapshot. Agents never see each other's records.
type Checkpoint struct {
	Agents map[string]json.RawMessage `json:"agents"`
}

// ThreadRef names the thread a run belongs to.
type ThreadRef struct {
	// ThreadID is the thread, which is also the run's workflow ID.
	ThreadID string `json:"thread_id"`
	// RunID is the loading run's own run ID.
	RunID string `json:"run_id"`
	// PreviousRunID is the thread's last closed run when this run started
	// ("" for a new thread).
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

// StartInput is the part of an agent run's input the Temporal checkpointer
// reads to step over a run that closed without a result.
type StartInput struct {
	PreviousRunID string `json:"previous_run_id,omitempty"`
}

// TemporalCheckpointer keeps checkpoints in Temporal itself: a run's result
// (or its failure's details) carries the thread's checkpoint, and the next
// run loads it from the thread's last closed run. Save does nothing. A run
// that closed with neither (terminated, timed out) is stepped over: its
// own previous run is read instead.
type TemporalCheckpointer struct {
	// Client reads the runs. Zero value: the activity's own client.
	Client client.Client
	// MaxSkip bounds how many result-less runs are stepped over. Zero
	// value: 100.
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
	runID := ref.PreviousRunID
	for i := 0; runID != "" && i <= limit; i++ {
		var out RunOutcome
		err := c.GetWorkflow(ctx, ref.ThreadID, runID).GetWithOptions(ctx, &out, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
		if err == nil {
			return out.Checkpoint, nil
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.HasDetails() {
			if derr := appErr.Details(&out); derr == nil && out.Checkpoint != nil {
				return out.Checkpoint, nil
			}
		}
		// No result: read this run's own previous run from its start input.
		prev, perr := PreviousRunOf(ctx, c, ref.ThreadID, runID)
		if perr != nil {
			return nil, temporal.NewApplicationErrorWithCause(
				fmt.Sprintf("thread %s: reading run %s: %v", ref.ThreadID, runID, perr), ErrCheckpoint, perr)
		}
		runID = prev
	}
	return nil, nil
}

// Save implements Checkpointer: the run's result is the checkpoint.
func (TemporalCheckpointer) Save(context.Context, ThreadRef, *Checkpoint) error { return nil }

// PreviousRunOf reads a run's PreviousRunID from its start input.
func PreviousRunOf(ctx context.Context, c client.Client, workflowID, runID string) (string, error) {
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
	if err := converter.GetDefaultDataConverter().FromPayload(attrs.GetInput().GetPayloads()[0], &in); err != nil {
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
