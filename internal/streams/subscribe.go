package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Item is one item a subscriber receives.
type Item struct {
	Topic  string
	Data   string // the wire data: base64 of a Payload
	Offset int64
	// RunID is the run whose stream answered (a chain of continue-as-new
	// runs shares one offset sequence).
	RunID string
}

// Decode reads the item's data into ptr (the default payload converter).
func (it Item) Decode(ptr any) error { return Decode(it.Data, ptr) }

// SubscribeOptions say what to read. The zero value reads every topic of
// the workflow's latest run from its oldest item.
type SubscribeOptions struct {
	// RunID is the run to start with (zero: the latest); the subscriber
	// follows it through continue-as-new, and stops when the chain
	// closes otherwise.
	RunID string
	// Topics to read (zero: all).
	Topics []string
	// From is the first offset wanted (zero: the oldest kept).
	From int64
	// Cooldown is the pause between polls when no more items are ready.
	// Zero: 100 ms.
	Cooldown time.Duration
}

// Subscribe long-polls a workflow's stream and calls fn with each item, in
// offset order, until the run (or its continue-as-new chain) closes (nil),
// fn fails (that error), or ctx ends. A subscriber behind a truncation
// resumes at the oldest item kept; one polling while the run hands over to
// its continuation polls again on the next run.
func Subscribe(ctx context.Context, c client.Client, workflowID string, opts SubscribeOptions, fn func(Item) error) error {
	if opts.Cooldown <= 0 {
		opts.Cooldown = 100 * time.Millisecond
	}
	topics := opts.Topics
	if topics == nil {
		topics = []string{}
	}
	offset := opts.From
	// The chain is pinned by its first run, not by a run: a poll goes to
	// the chain's current run (a poll that meets a continue-as-new lands
	// on the next run, which goes on with the same offsets), and never to
	// a later chain on the same workflow ID (a thread's next run).
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, opts.RunID)
	if err != nil {
		return fmt.Errorf("streams: subscribe to %s: %w", workflowID, err)
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	first := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	if first == "" {
		first = run
	}
	pause := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(opts.Cooldown):
			return nil
		}
	}
	for {
		var res PollResult
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflowID, FirstExecutionRunID: first, UpdateName: PollUpdate,
			Args: []any{PollInput{Topics: topics, FromOffset: offset}}, WaitForStage: client.WorkflowUpdateStageAccepted})
		if err == nil {
			if r := h.RunID(); r != "" {
				run = r
			}
			err = h.Get(ctx, &res)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var appErr *temporal.ApplicationError
			var nf *serviceerror.NotFound
			var pre *serviceerror.FailedPrecondition
			var waited *client.WorkflowUpdateServiceTimeoutOrCanceledError
			switch {
			case errors.As(err, &appErr) && appErr.Type() == ErrTruncatedOffset:
				offset = 0
				continue
			case errors.As(err, &appErr) && appErr.Type() == ErrStreamDraining:
				if err := pause(); err != nil {
					return err
				}
				continue
			case errors.As(err, &appErr) && appErr.Type() == ErrAcceptedUpdateCompletedWorkflow, errors.As(err, &nf), errors.As(err, &pre),
				// The client's call gave up waiting (its own deadline,
				// not ctx's): is the chain still open?
				errors.As(err, &waited):
				open, err := chainOpen(ctx, c, workflowID, first)
				if err != nil || !open {
					return err
				}
				if err := pause(); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("streams: poll %s: %w", workflowID, err)
		}
		for _, it := range res.Items {
			if err := fn(Item{Topic: it.Topic, Data: it.Data, Offset: it.Offset, RunID: run}); err != nil {
				return err
			}
		}
		offset = res.NextOffset
		if !res.MoreReady {
			if err := pause(); err != nil {
				return err
			}
		}
	}
}

// chainOpen reports whether the workflow's current run is still open and
// of the chain that began with run first.
func chainOpen(ctx context.Context, c client.Client, workflowID, first string) (bool, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return false, fmt.Errorf("streams: describe %s: %w", workflowID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	return info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
		(info.GetFirstRunId() == first || info.GetExecution().GetRunId() == first), nil
}
