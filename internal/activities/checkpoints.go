package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Checkpoints holds the checkpoint activities of a worker.
type Checkpoints struct {
	Checkpointer threadstate.Checkpointer
	// Custom: runs save their state through Checkpointer at their end (a
	// custom one, or a TemporalCheckpointer with a Store).
	Custom bool
	// Store is the TemporalCheckpointer's thread store, if it has one.
	Store threadstate.Checkpointer
}

// Load is the LoadCheckpointActivity function (runs recorded before
// LoadThreadActivity).
func (c Checkpoints) Load(ctx context.Context, ref threadstate.ThreadRef) (*threadstate.Checkpoint, error) {
	cp, err := c.Checkpointer.Load(ctx, ref)
	if err != nil {
		return nil, err
	}
	if cp == nil {
		cp = &threadstate.Checkpoint{}
	}
	return cp, nil
}

// Save is the SaveCheckpointActivity function (runs recorded before
// SaveThreadActivity).
func (c Checkpoints) Save(ctx context.Context, ref threadstate.ThreadRef, cp *threadstate.Checkpoint) error {
	return c.Checkpointer.Save(ctx, ref, cp)
}

// LoadThread is the LoadThreadActivity function: the thread's state, and
// whether the run must save its own at its end (a custom Checkpointer).
// The run takes that decision from this result, in its history, not from
// the worker's configuration.
func (c Checkpoints) LoadThread(ctx context.Context, ref threadstate.ThreadRef) (threadstate.LoadedThread, error) {
	ctx, stop, note := heartbeatWith(ctx)
	defer stop()
	if c.Store == nil && !c.Custom {
		warnNoStore(ctx)
	}
	cp, err := c.Checkpointer.Load(threadstate.WithListingNote(ctx, note), ref)
	if err != nil {
		return threadstate.LoadedThread{}, err
	}
	return threadstate.LoadedThread{State: cp, Save: c.Custom}, nil
}

// SaveThread is the SaveThreadActivity function: it reads in full what the
// state holds by reference (from the runs that hold it) and saves that, so
// a custom Checkpointer keeps states that need no run's history.
func (c Checkpoints) SaveThread(ctx context.Context, ref threadstate.ThreadRef, cp *threadstate.Checkpoint) error {
	ctx, stop := heartbeat(ctx)
	defer stop()
	if byReference(cp) {
		cl := activity.GetClient(ctx)
		full, err := threadstate.ResolveCheckpoint(ctx, cl, ref.ThreadID, cp)
		if err != nil && c.Store != nil {
			// A run the state names was deleted while this run was
			// open: the store's state holds what it held.
			if stored, serr := c.Store.Load(ctx, ref); serr == nil && stored != nil {
				full, err = threadstate.ResolveCheckpointWithStored(ctx, cl, ref.ThreadID, cp, stored)
			}
		}
		if err != nil {
			return threadstate.Lost(ref.ThreadID, err)
		}
		cp = full
	}
	err := c.Checkpointer.Save(ctx, ref, cp)
	var bad *threadstate.EntryError
	if errors.As(err, &bad) {
		// A store that does not move a bad entry aside: a retry meets
		// the same bytes.
		return temporal.NewNonRetryableApplicationError(err.Error(), protocol.ErrCheckpoint, err)
	}
	return err
}

// byReference reports whether cp holds anything by reference: messages in
// other runs, thin records, results in messages.
func byReference(cp *threadstate.Checkpoint) bool {
	if cp == nil {
		return false
	}
	if cv := cp.Conversation; cv != nil && cv.Count > 0 {
		return true
	}
	for _, m := range cp.Messages {
		if m.ContentIn != nil {
			return true
		}
	}
	for _, snap := range cp.Agents {
		l, err := dedup.Restore(snap)
		if err != nil {
			return true // ResolveCheckpoint reports it
		}
		for _, r := range l.Records() {
			if r.Thin() || r.ResultIn != nil {
				return true
			}
		}
	}
	return false
}

// warned holds the namespaces whose missing thread store this process
// has warned of.
var warned sync.Map

// warnNoStore says once per process and namespace, at the first thread
// load, that the worker keeps no thread store while the namespace deletes
// closed runs: a thread whose runs are all gone then looks new.
func warnNoStore(ctx context.Context) {
	ns := activity.GetInfo(ctx).WorkflowNamespace
	if _, done := warned.LoadOrStore(ns, true); done {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := activity.GetClient(ctx).WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	if err != nil {
		return
	}
	if ttl := d.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); ttl > 0 {
		activity.GetLogger(ctx).Warn("tulip: no thread store: namespace "+ns+" deletes closed runs after "+ttl.String()+
			", and a thread whose runs are all gone would start empty (tulip.Options.ThreadStore; docs/threads.md)", "namespace", ns, "retention", ttl.String())
	}
}
