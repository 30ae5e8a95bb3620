package threadstate

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// ErrThreadLost: the thread's state is gone. A run it names (the newest,
// or one that holds part of its state) was deleted, by the namespace's
// retention or by hand, and no thread store keeps the thread. The run
// fails at its start, non-retryable, instead of starting with an empty log
// (which would run an idempotent refund again).
const ErrThreadLost = "tulip.ThreadLost"

// threadLost is the ErrThreadLost failure for a thread whose run is gone.
func threadLost(threadID, runID string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("thread %s lost its state: run %s, which holds it, was deleted (the namespace's retention?) and no thread store keeps the thread", threadID, runID),
		ErrThreadLost, nil)
}

// goneRun is a run that a thread load needed and found deleted.
type goneRun struct{ run string }

func (g *goneRun) Error() string { return "run " + g.run + " was deleted" }

// missingRun returns a run that cp names and that no longer exists, or ""
// when none is missing. Retention deletes a thread's runs oldest first, so
// it asks only for the oldest run of each kind cp names: the first run
// holding part of its conversation, and the holder of its first record
// held elsewhere. (A run deleted by hand in the middle of a thread is
// found later, when its content is read: from the thread store, or with
// ErrThreadLost.)
func missingRun(ctx context.Context, c client.Client, threadID string, cp *Checkpoint) (string, error) {
	var runs []string
	if cv := cp.Conversation; cv != nil && len(cv.Parts) > 0 {
		runs = append(runs, cv.Parts[0].Run)
	}
	for _, snap := range cp.Agents {
		l, err := dedup.Restore(snap)
		if err != nil {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("thread %s: %v", threadID, err), protocol.ErrCheckpoint, nil)
		}
		for _, r := range l.Records() {
			if r.Thin() || r.ResultIn != nil {
				runs = append(runs, r.HeldBy())
				break
			}
		}
	}
	seen := map[string]bool{cp.Run: true, "": true} // cp.Run was read just now
	for _, run := range runs {
		if seen[run] {
			continue
		}
		seen[run] = true
		if _, err := c.DescribeWorkflowExecution(ctx, threadID, run); deleted(err) {
			return run, nil
		} else if err != nil {
			return "", fmt.Errorf("thread %s: reading run %s: %w", threadID, run, err)
		}
	}
	return "", nil
}

// EntryError is a thread store's entry that cannot be read: its bytes are
// corrupt (truncated, not what the store writes), or it is encrypted with a
// key the store's codec lacks (Err is then a *codec.KeyError naming it).
// A store returns it, from Load and from Save's read, for an entry it will
// never read however often it tries; an I/O error or an unavailable
// service is another error (retried).
//
// The runtime never lets one bad entry wedge a thread: a load that needs
// the entry (history no longer holds the state) fails at once with
// ThreadLost naming Entry and the cause, and a store's Save moves the
// entry aside (it is never deleted) and writes the run's state, which
// history holds, fresh.
type EntryError struct {
	Thread string // the thread
	Entry  string // where the entry is: a file, an object key
	Err    error  // why it cannot be read
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("thread store entry %s (thread %s) cannot be read: %v", e.Entry, e.Thread, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// unreadable is ErrThreadLost for a load that needed a thread store entry
// that cannot be read.
func unreadable(threadID string, e *EntryError) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("thread %s lost its state: history no longer holds it and its thread store entry %s cannot be read: %v (fix the entry, or restore the key, and run again)",
			threadID, e.Entry, e.Err), ErrThreadLost, nil)
}

// Lost turns the error of a read that needed a deleted run into
// ErrThreadLost (non-retryable: the run is not coming back).
func Lost(threadID string, err error) error {
	var gone *goneRun
	if errors.As(err, &gone) {
		return threadLost(threadID, gone.run)
	}
	return err
}
