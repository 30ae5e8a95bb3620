package agentrun

import (
	"time"

	"go.temporal.io/sdk/temporal"
)

// RetryWindow bounds the retries of the activities a run needs to go on
// (the model, loading and saving its thread, listing its toolsets): each
// is retried, attempt after attempt, until it succeeds, fails with a
// non-retryable error, or this long has passed since it was first
// scheduled. Faults that pass (a worker killed, a history or matching
// service restarting, the database restarting) then cost time, not the
// run; a fault that lasts longer fails the run with the activity's last
// error.
const RetryWindow = 10 * time.Minute

// retryUntilWindow is the retry policy of those activities: no attempt
// limit, backoff from 1 s to 30 s (their ScheduleToCloseTimeout is
// RetryWindow).
func retryUntilWindow() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second}
}
