package agentrun

import (
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
)

// A tool whose OnUnknown is "check" has its lost attempts and ambiguous
// errors end its activity (activities.Tool.Options makes them
// non-retryable); the run then asks the tool's check whether the service
// applied the key, and runs the call again, with the same key, only when
// it did not. All of it stands between the execution's future and its
// readers (calllog.Call.Resolve), so a twin served while it runs is
// served the resolved outcome.

// maxUnknownRounds bounds a call's executions when its retry policy sets
// no MaximumAttempts.
const maxUnknownRounds = 10

// checkUnknown is the Resolve of a call of a tool with a check: st is the
// call's step, in its input.
func (r *run) checkUnknown(st *step, tool *activities.Tool, in activities.ToolInput) func(wf.Context, wf.Future) wf.Future {
	return func(ctx wf.Context, execution wf.Future) wf.Future {
		f, set := wf.NewFuture(ctx)
		started := wf.Now(ctx)
		wf.Go(ctx, func(ctx wf.Context) {
			// The payload passes as it came (read as a RawValue:
			// the codec applied, no converter), for the readers to
			// decode as they would the execution's.
			var raw converter.RawValue
			err := execution.Get(ctx, &raw)
			settle := func(err error) {
				if err != nil {
					set.SetError(err)
					return
				}
				set.SetValue(&commonpb.Payloads{Payloads: []*commonpb.Payload{raw.Payload()}})
			}
			cause := unknownCause(err, wf.Now(ctx).Sub(started))
			if cause == "" || wf.GetVersion(ctx, "tulip-unknown-outcome", wf.DefaultVersion, 1) == wf.DefaultVersion {
				settle(err)
				return
			}
			u := &Unknown{Cause: cause}
			st.line.Unknown = u
			rounds := maxUnknownRounds
			if n := tool.Options().RetryPolicy.MaximumAttempts; n > 0 {
				rounds = int(n)
			}
			for {
				u.Checks++
				var out activities.CheckOutput
				if err := r.check(ctx, tool, in).Get(ctx, &out); err != nil {
					u.Resolution = Unresolved
					set.SetError(outcomeUnknown(fmt.Sprintf("tool %s may have run (%s), and its check failed: %s",
						in.Tool, u.Cause, calllog.ToolErrorOf(err).Message)))
					return
				}
				if out.Applied {
					u.Resolution = ResolvedApplied
					raw = activities.JSONPayload(jsonOutput(out.Result))
					settle(nil)
					return
				}
				if 1+u.Retries >= rounds {
					u.Resolution = Unresolved
					set.SetError(outcomeUnknown(fmt.Sprintf("tool %s may have run (%s); its check found it not applied, and its %d executions were each lost",
						in.Tool, u.Cause, rounds)))
					return
				}
				u.Retries++
				started = wf.Now(ctx)
				err := r.execute(ctx, tool, in).Get(ctx, &raw)
				if unknownCause(err, wf.Now(ctx).Sub(started)) != "" {
					continue
				}
				u.Resolution = ResolvedRetried
				settle(err)
				return
			}
		})
		return f
	}
}

// unknownCause says why err leaves an attempt's outcome unknown (its
// worker lost, after d; an error of type ErrAmbiguous), or "" when it
// does not.
func unknownCause(err error, d time.Duration) string {
	if err == nil {
		return ""
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		switch te.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			return fmt.Sprintf("its attempt was lost: no heartbeat, %s after the call started", d.Round(time.Second))
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
			return fmt.Sprintf("its attempt was lost: start-to-close timeout, %s after the call started", d.Round(time.Second))
		}
		return ""
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == activities.ErrAmbiguous {
		return "ambiguous error: " + ae.Message()
	}
	return ""
}

func outcomeUnknown(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, activities.ErrOutcomeUnknown, nil)
}

// jsonOutput is a tool output's JSON, as the activity writes it.
func jsonOutput(result []byte) []byte {
	b := make([]byte, 0, len(result)+12)
	b = append(b, `{"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// check starts the tool's check activity for in: the tool's timeouts,
// the default retry policy (a check is a read: a lost attempt is tried
// again).
func (r *run) check(ctx wf.Context, tool *activities.Tool, in activities.ToolInput) wf.Future {
	opts := tool.Options()
	rp := activities.DefaultToolRetryPolicy
	o := wf.ActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, HeartbeatTimeout: opts.HeartbeatTimeout, RetryPolicy: &rp}
	if !wf.IsReplaying(ctx) {
		o.Summary = "check · " + activitySummary(in.Tool, in.IdempotencyKey)
	}
	return wf.ExecuteActivity(wf.WithActivityOptions(ctx, o), activities.CheckActivityName(in.Tool), in)
}

// execute starts the tool's activity for in again: the same input, the
// same key.
func (r *run) execute(ctx wf.Context, tool *activities.Tool, in activities.ToolInput) wf.Future {
	opts := tool.Options()
	o := wf.ActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, RetryPolicy: opts.RetryPolicy, HeartbeatTimeout: opts.HeartbeatTimeout}
	var input any = r.unsent()
	if !wf.IsReplaying(ctx) {
		o.Summary = activitySummary(in.Tool, in.IdempotencyKey)
		input = activities.ToolInputJSON(in).Payload()
	}
	return wf.ExecuteActivity(wf.WithActivityOptions(ctx, o), tool.ActivityName(), input)
}
