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
// the workflow's latest run from its oldest item, by the read query.
type SubscribeOptions struct {
	// RunID is the run to start with (zero: the latest); the subscriber
	// follows it through continue-as-new, and stops when the chain
	// closes otherwise.
	RunID string
	// Topics to read (zero: all).
	Topics []string
	// From is the first offset wanted (zero: the oldest kept).
	From int64
	// UpdatePoll reads by the protocol's poll update, as every SDK's
	// workflow streams client does, instead of the read query: each poll
	// that returns adds two events (update accepted and completed) to the
	// run's history. Zero: the read query, which adds none (a run without
	// it, from an older worker, is read by the poll update all the same).
	UpdatePoll bool
	// MinWait and MaxWait pace the read query (the reader's long poll):
	// after a read that brought items, or while the run hands its stream
	// over, the next read is MinWait later; each read that brings nothing
	// doubles the pause, up to MaxWait. Zero: 20 ms and 500 ms (an idle
	// reader reads about twice a second).
	MinWait, MaxWait time.Duration
	// Cooldown is the pause between polls when no more items are ready
	// (UpdatePoll, or a run without the read query). Zero: 100 ms.
	Cooldown time.Duration
}

// finalReadTimeout bounds each read of a closed run (a query a worker
// answers by replaying the run, when a worker is there to), and
// finalReadBudget all of them (reads that failed are tried again).
const (
	finalReadTimeout = 10 * time.Second
	finalReadBudget  = 45 * time.Second
)

// Subscribe reads a workflow's stream and calls fn with each item, in
// offset order, until the run (or its continue-as-new chain) closes (nil),
// fn fails (that error), or ctx ends. A subscriber behind a truncation
// resumes at the oldest item kept.
//
// It reads by the read query (ReadQuery), which adds nothing to the run's
// history: a long poll on the reader's side, querying the run it reads
// and, while nothing is new, waiting between reads (MinWait, MaxWait). It
// follows the chain run by run: when the run it reads has closed (the
// query, asked to reject a closed run, says so), it reads that run's
// remaining items by a query a worker answers by replaying the closed run
// (items the run did not hand over to its continuation are read there; a
// read that fails is tried again, and if no worker answers within
// finalReadBudget they are not read), then goes
// on with the run it continued as (its close event names it) or returns.
// A chain that has closed before Subscribe is called is not read (nil at
// once, as a poll, which a closed run does not take, reads it).
// A run whose worker has no read query (an older build: the query fails
// as unknown) is read by the poll update from then on, as UpdatePoll
// reads.
func Subscribe(ctx context.Context, c client.Client, workflowID string, opts SubscribeOptions, fn func(Item) error) error {
	if opts.Cooldown <= 0 {
		opts.Cooldown = 100 * time.Millisecond
	}
	if opts.MinWait <= 0 {
		opts.MinWait = 20 * time.Millisecond
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 500 * time.Millisecond
	}
	opts.MaxWait = max(opts.MaxWait, opts.MinWait)
	if opts.Topics == nil {
		opts.Topics = []string{}
	}
	// The chain is pinned by its first run, not by a run: a poll goes to
	// the chain's current run (a poll that meets a continue-as-new lands
	// on the next run, which goes on with the same offsets), and never to
	// a later chain on the same workflow ID (a thread's next run). The
	// read query goes to one run at a time, and to the next by the
	// previous one's close event: the same chain.
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, opts.RunID)
	if err != nil {
		return fmt.Errorf("streams: subscribe to %s: %w", workflowID, err)
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	first := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	if first == "" {
		first = run
	}
	r := &reader{c: c, workflowID: workflowID, opts: opts, fn: fn, offset: opts.From, run: run, first: first}
	if opts.UpdatePoll {
		return r.poll(ctx)
	}
	// A chain closed already is not read (as a poll cannot read it): the
	// closed runs a reader reads are those that close while it reads, and
	// those a chain still open continued from.
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if open, err := chainOpen(ctx, c, workflowID, first); err != nil || !open {
			return err
		}
	}
	return r.query(ctx)
}

// reader is one subscription: where it is, and what it calls.
type reader struct {
	c          client.Client
	workflowID string
	opts       SubscribeOptions
	fn         func(Item) error
	offset     int64
	run        string // the run read (by query) or last answered (by poll)
	first      string // the chain's first run
}

func (r *reader) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *reader) deliver(items []WireItem) error {
	for _, it := range items {
		if err := r.fn(Item{Topic: it.Topic, Data: it.Data, Offset: it.Offset, RunID: r.run}); err != nil {
			return err
		}
	}
	return nil
}

// read queries run r.run for the items from r.offset; closed is the
// run's status when reject is set and the run has closed (no result).
func (r *reader) read(ctx context.Context, reject enumspb.QueryRejectCondition) (res ReadResult, closed enumspb.WorkflowExecutionStatus, err error) {
	resp, err := r.c.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{WorkflowID: r.workflowID, RunID: r.run,
		QueryType: ReadQuery, Args: []any{PollInput{Topics: r.opts.Topics, FromOffset: r.offset}}, QueryRejectCondition: reject})
	if err != nil {
		return res, 0, err
	}
	if rej := resp.QueryRejected; rej != nil {
		return res, rej.GetStatus(), nil
	}
	if resp.QueryResult == nil {
		return res, 0, errors.New("streams: the read query answered nothing")
	}
	return res, 0, resp.QueryResult.Get(&res)
}

// query reads by the read query (Subscribe).
func (r *reader) query(ctx context.Context) error {
	wait := r.opts.MinWait
	for {
		res, closed, err := r.read(ctx, enumspb.QUERY_REJECT_CONDITION_NOT_OPEN)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The read query's handler answers every input: a query that
			// fails is one the run has no handler for (a worker older
			// than it, or a run with no stream, which the poll tells as
			// it always has). The server says so by QueryFailed, whose
			// message alone names the cause: the type is the test.
			var failed *serviceerror.QueryFailed
			var nf *serviceerror.NotFound
			switch {
			case errors.As(err, &failed):
				return r.poll(ctx)
			case errors.As(err, &nf): // the run is gone (retention)
				return nil
			case transient(err):
				if err := r.pause(ctx, r.opts.MaxWait); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("streams: read %s: %w", r.workflowID, err)
		}
		if closed != enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
			if err := r.finalRead(ctx); err != nil {
				return err
			}
			if closed != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				return nil
			}
			next, err := r.continuedAs(ctx)
			if err != nil || next == "" {
				return err
			}
			r.run, wait = next, r.opts.MinWait
			continue
		}
		if err := r.deliver(res.Items); err != nil {
			return err
		}
		r.offset = max(r.offset, res.NextOffset)
		switch {
		case res.MoreReady:
			continue
		case len(res.Items) > 0 || res.Draining:
			wait = r.opts.MinWait
		default:
			wait = min(2*wait, r.opts.MaxWait)
		}
		if err := r.pause(ctx, wait); err != nil {
			return err
		}
	}
}

// finalRead reads what the closed run r.run holds from r.offset on (its
// worker replays it to answer). A read that fails for a while (no worker
// answered within finalReadTimeout, the server was busy: a loaded worker
// may take that long to replay a run) is tried again, until
// finalReadBudget has passed; a run that cannot answer (no read query,
// gone), or none answers within the budget, is left unread.
func (r *reader) finalRead(ctx context.Context) error {
	deadline := time.Now().Add(finalReadBudget)
	for {
		qctx, cancel := context.WithTimeout(ctx, min(finalReadTimeout, time.Until(deadline)))
		res, _, err := r.read(qctx, enumspb.QUERY_REJECT_CONDITION_NONE)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !transient(err) || time.Now().After(deadline) {
				return ctx.Err()
			}
			if err := r.pause(ctx, r.opts.MaxWait); err != nil {
				return err
			}
			continue
		}
		if err := r.deliver(res.Items); err != nil {
			return err
		}
		r.offset = max(r.offset, res.NextOffset)
		if !res.MoreReady {
			return nil
		}
	}
}

// continuedAs is the run that r.run continued as ("" when its close event
// names none).
func (r *reader) continuedAs(ctx context.Context) (string, error) {
	it := r.c.GetWorkflowHistory(ctx, r.workflowID, r.run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", fmt.Errorf("streams: close event of %s: %w", r.workflowID, err)
		}
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			return a.GetNewExecutionRunId(), nil
		}
	}
	return "", nil
}

// transient says a read may succeed if tried again: the run's workflow
// task is failing, the server is busy or unreachable, or the call's own
// deadline (not ctx's) passed, as it does while no worker answers.
func transient(err error) bool {
	var notReady *serviceerror.WorkflowNotReady
	var busy *serviceerror.ResourceExhausted
	var down *serviceerror.Unavailable
	var late *serviceerror.DeadlineExceeded
	var canceled *serviceerror.Canceled
	return errors.As(err, &notReady) || errors.As(err, &busy) || errors.As(err, &down) || errors.As(err, &late) ||
		errors.As(err, &canceled) || errors.Is(err, context.DeadlineExceeded)
}

// poll long-polls by the poll update (UpdatePoll; a run without the read
// query).
func (r *reader) poll(ctx context.Context) error {
	pause := func() error { return r.pause(ctx, r.opts.Cooldown) }
	workflowID, first := r.workflowID, r.first
	for {
		var res PollResult
		h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflowID, FirstExecutionRunID: first, UpdateName: PollUpdate,
			Args: []any{PollInput{Topics: r.opts.Topics, FromOffset: r.offset}}, WaitForStage: client.WorkflowUpdateStageAccepted})
		if err == nil {
			if run := h.RunID(); run != "" {
				r.run = run
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
				r.offset = 0
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
				open, err := chainOpen(ctx, r.c, workflowID, first)
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
		if err := r.deliver(res.Items); err != nil {
			return err
		}
		r.offset = res.NextOffset
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
