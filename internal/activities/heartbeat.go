package activities

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// DefaultHeartbeatTimeout is the heartbeat timeout of tool and model
// activities when their options leave it zero: a worker that dies with an
// activity in flight costs that long, not the activity's start-to-close
// timeout, before Temporal retries it elsewhere.
const DefaultHeartbeatTimeout = 5 * time.Second

// heartbeat records the activity's heartbeat from its own goroutine, a few
// times per heartbeat timeout, until the returned stop is called: tool
// bodies and models need not heartbeat themselves. The returned context is
// ctx, cancelled once the server says the attempt is over. Outside an
// activity, or without a heartbeat timeout, it does nothing.
func heartbeat(ctx context.Context) (context.Context, func()) {
	ctx, stop, _ := heartbeatWith(ctx)
	return ctx, stop
}

// heartbeatWith is heartbeat whose heartbeats carry details once note
// sets them (note sends one, and returns once it is answered or its time
// is up): a later attempt of the activity reads them with
// activity.GetHeartbeatDetails.
//
// The heartbeats go through the worker's client, not through
// activity.RecordHeartbeat: the regular ones one at a time (a heartbeat
// note sends may go beside one), each with three quarters of the
// heartbeat timeout to be answered. The SDK gives a heartbeat no longer than the
// worker's heartbeat throttle interval (1 s under the plugin): on a server
// that answered heartbeats in over a second every one failed, and the
// server timed the attempt out; and a heartbeat that failed with a
// transient error (a server restarting, a dropped connection) cancelled
// the attempt at once. A 160-thread soak lost a run that way: its thread
// load, attempt after attempt, until its retry window closed. Here a
// failed heartbeat is tried again, and only the server ends the attempt:
// its answer that the attempt is gone (timed out, or the run closed), that
// cancellation was asked for, or that the activity was paused or reset
// cancels the returned context, with that answer as its cause.
func heartbeatWith(ctx context.Context) (context.Context, func(), func(details any)) {
	if !activity.IsActivity(ctx) {
		return ctx, func() {}, func(any) {}
	}
	info := activity.GetInfo(ctx)
	c := activity.GetClient(ctx)
	timeout := info.HeartbeatTimeout
	if timeout <= 0 || c == nil || len(info.TaskToken) == 0 {
		return ctx, func() {}, func(d any) { activity.RecordHeartbeat(ctx, d) }
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var details atomic.Pointer[any]
	send := func() {
		hctx, hcancel := context.WithTimeout(ctx, timeout*3/4)
		defer hcancel()
		var err error
		if d := details.Load(); d != nil {
			err = c.RecordActivityHeartbeat(hctx, info.TaskToken, *d)
		} else {
			err = c.RecordActivityHeartbeat(hctx, info.TaskToken)
		}
		if attemptOver(err) {
			cancel(err)
		}
	}
	// note sends its heartbeat before it returns: what it carries (a
	// thread load's list of runs) is on the server before the attempt
	// goes on, so a later attempt has it even if this one dies next.
	note := func(d any) {
		details.Store(&d)
		send()
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(max(timeout/4, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				send()
			}
		}
	}()
	// stop cancels a heartbeat in flight, and returns once none is.
	return ctx, func() { close(done); cancel(context.Canceled); <-stopped }, note
}

// attemptOver reports whether a heartbeat's error is the server saying
// the attempt is over, as opposed to a failure to reach it.
func attemptOver(err error) bool {
	var nf *serviceerror.NotFound
	var canceled *temporal.CanceledError
	return errors.As(err, &nf) || errors.As(err, &canceled) ||
		errors.Is(err, activity.ErrActivityPaused) || errors.Is(err, activity.ErrActivityReset)
}
