package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// DefaultHeartbeatTimeout is the heartbeat timeout of tool and model
// activities when their options leave it zero: a worker that dies with an
// activity in flight costs that long, not the activity's start-to-close
// timeout, before Temporal retries it elsewhere.
const DefaultHeartbeatTimeout = 5 * time.Second

// heartbeat records the activity's heartbeat from its own goroutine, a few
// times per heartbeat timeout, until the returned stop is called: tool
// bodies and models need not heartbeat themselves. Outside an activity, or
// without a heartbeat timeout, it does nothing.
func heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	timeout := activity.GetInfo(ctx).HeartbeatTimeout
	if timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(timeout/4, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
