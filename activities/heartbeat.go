package activities

import (
	"context"
	"sync/atomic"
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
	stop, _ = heartbeatWith(ctx)
	return stop
}

// heartbeatWith is heartbeat whose heartbeats carry details once note
// sets them (and note records one at once): a later attempt of the
// activity reads them with activity.GetHeartbeatDetails.
func heartbeatWith(ctx context.Context) (stop func(), note func(details any)) {
	if !activity.IsActivity(ctx) {
		return func() {}, func(any) {}
	}
	var details atomic.Pointer[any]
	note = func(d any) {
		details.Store(&d)
		activity.RecordHeartbeat(ctx, d)
	}
	timeout := activity.GetInfo(ctx).HeartbeatTimeout
	if timeout <= 0 {
		return func() {}, note
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
				if d := details.Load(); d != nil {
					activity.RecordHeartbeat(ctx, *d)
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done) }, note
}
