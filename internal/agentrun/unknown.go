package agentrun

import (
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// A tool whose OnUnknown is "check" or "hold" has its lost attempts and
// ambiguous errors end its activity (activities.Tool.Options makes them
// non-retryable); the run then asks the tool's check whether the service
// applied the key (or, "hold", a person, by an interrupt), and runs the
// call again, with the same key, only when it did not (or the person
// approves). All of it stands between the execution's future and its
// readers (calllog.Call.Resolve), so a twin served while it runs is
// served the resolved outcome.

// maxUnknownRounds bounds a call's executions when its retry policy sets
// no MaximumAttempts.
const maxUnknownRounds = 10

// UnknownHook names, in an Interrupt, a call of a tool whose OnUnknown is
// "hold" and whose outcome is unknown: a resume with PerformDangling runs
// it again with the same key, one with Results (one, for that call) says
// what happened, and one with neither leaves it unknown (its Answer says
// why, in the call's error).
const UnknownHook = "tulip.unknown"

// resolveUnknown is the Resolve of a call of a tool that checks or holds
// its unknown outcomes: st is the call's step, in its input.
func (r *run) resolveUnknown(st *step, tool *activities.Tool, in activities.ToolInput) func(wf.Context, wf.Future) wf.Future {
	return func(ctx wf.Context, execution wf.Future) wf.Future {
		f, set := wf.NewFuture(ctx)
		started := wf.Now(ctx)
		wf.Go(ctx, func(ctx wf.Context) {
			// An execution's payloads pass as they came, still encoded
			// (chained into a plain future, read as *Payloads: no codec,
			// no converter), for the readers to decode as they would the
			// execution's. An answer (a check's, a person's) is JSON.
			var p *commonpb.Payloads
			read := func(execution wf.Future) error {
				g, gs := wf.NewFuture(ctx)
				gs.Chain(execution)
				p = nil
				return g.Get(ctx, &p)
			}
			answer := func(result []byte) {
				set.SetValue(&commonpb.Payloads{Payloads: []*commonpb.Payload{activities.JSONPayload(jsonOutput(result)).Payload()}})
			}
			settle := func(err error) {
				if err != nil {
					set.SetError(err)
					return
				}
				set.SetValue(p)
			}
			err := read(execution)
			lost := wf.Now(ctx).Sub(started)
			cause, heartbeat := unknownCause(err, lost)
			if cause == "" || r.version(ctx, "tulip-unknown-outcome") == wf.DefaultVersion {
				settle(err)
				return
			}
			u := &Unknown{Cause: cause}
			st.line.Unknown = u
			opts := tool.Options()
			rounds := maxUnknownRounds
			if n := opts.RetryPolicy.MaximumAttempts; n > 0 {
				rounds = int(n)
			}
			holds := tool.Spec().OnUnknown == protocol.OnUnknownHold
			for {
				if holds {
					u.Holds++
					resume, err := r.holdUnknown(ctx, st, cause, heartbeat, opts.StartToCloseTimeout, 1+u.Retries < rounds)
					switch {
					case err != nil:
						u.Resolution = Unresolved
						set.SetError(err)
						return
					case len(resume.Results) == 1:
						u.Resolution = ResolvedAnswered
						result, terr := clientOutcome(resume.Results[0])
						if terr != nil {
							set.SetError(temporal.NewNonRetryableApplicationError(terr.Message, terr.Type, nil))
							return
						}
						answer(result)
						return
					case !resume.PerformDangling:
						u.Resolution = Unresolved
						why := "not run again"
						if resume.Answer != "" {
							why += ": " + resume.Answer
						}
						set.SetError(outcomeUnknown(fmt.Sprintf("tool %s may have run (%s); %s", in.Tool, u.Cause, why)))
						return
					}
					if 1+u.Retries >= rounds {
						// Refused when the hold was raised; a resume
						// recorded before says so here.
						u.Resolution = Unresolved
						set.SetError(outcomeUnknown(fmt.Sprintf("tool %s may have run (%s); not run again: its %d executions (RetryPolicy.MaximumAttempts) were used",
							in.Tool, u.Cause, rounds)))
						return
					}
				} else {
					if heartbeat {
						// An attempt lost by its heartbeat may still run
						// on a worker cut off from the server, until its
						// own start-to-close deadline: ask after that.
						if err := wf.Sleep(ctx, opts.StartToCloseTimeout); err != nil {
							set.SetError(err)
							return
						}
					}
					u.Checks++
					var out activities.CheckOutput
					if err := r.check(ctx, tool, in).Get(ctx, &out); err != nil {
						if temporal.IsCanceledError(err) {
							set.SetError(err)
							return
						}
						u.Resolution = Unresolved
						set.SetError(outcomeUnknown(fmt.Sprintf("tool %s may have run (%s), and its check failed: %s",
							in.Tool, u.Cause, calllog.ToolErrorOf(err).Message)))
						return
					}
					if out.Applied {
						u.Resolution = ResolvedApplied
						answer(out.Result)
						return
					}
					if 1+u.Retries >= rounds {
						// Known not applied, with no execution left.
						u.Resolution = ResolvedNotApplied
						set.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf("tool %s did not run: its check found it not applied after each of its %d executions was lost (%s)",
							in.Tool, rounds, u.Cause), protocol.ErrToolFailed, nil))
						return
					}
				}
				u.Retries++
				started = wf.Now(ctx)
				err := read(r.execute(ctx, tool, in))
				if c, hb := unknownCause(err, wf.Now(ctx).Sub(started)); c != "" {
					cause, heartbeat = c, hb
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

// holdUnknown interrupts the run at the call of st, whose outcome is
// unknown (cause), and returns the resume that answers it. The call shows
// a held line meanwhile. One interrupt is open at a time: it waits for
// any other to be answered first. Its answer is about this one call's
// outcome, as a client tool's result is, and adds nothing to the
// conversation: the run goes on matching after it, in the same phase
// (a person's answer to a hook's interrupt is what turns matching off).
func (r *run) holdUnknown(ctx wf.Context, st *step, cause string, heartbeat bool, startToClose time.Duration, again bool) (*ResumeInput, error) {
	if err := r.awaitNoInterrupt(ctx); err != nil {
		return nil, err
	}
	l := &st.line
	reason := fmt.Sprintf("%s may have run (%s): resume with perform_dangling to run it again with the same key, or with a result saying what happened", l.Tool, cause)
	switch {
	case !again:
		reason = fmt.Sprintf("%s may have run (%s): resume with a result saying what happened, or decline (it may not run again: its executions are used)", l.Tool, cause)
	case heartbeat:
		reason += fmt.Sprintf(" (the lost attempt may still run on a worker cut off from the server, up to %s after it started)", startToClose)
	}
	r.interrupts++
	r.interrupt = &Interrupt{ID: fmt.Sprintf("int-%d", r.interrupts), Turn: l.Turn, Hook: UnknownHook, Reason: reason,
		Held: []threadstate.ToolCall{{ID: l.CallID, Name: l.Tool, Arguments: string(l.Arguments)}}}
	r.holdRerun = again
	r.appendLine(ctx, TraceLine{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Arguments: l.Arguments, Outcome: OutcomeHeld, Key: l.Key}, -1)
	resume, err := r.waitResume(ctx, UnknownHook)
	if err != nil {
		return nil, err
	}
	if r.version(ctx, "tulip-unknown-hold-matches") == wf.DefaultVersion {
		// Runs before the change counted it as any resume.
		r.resumed = true
		r.phase++
		r.phaseTurn = 0
	}
	return resume, nil
}

// awaitNoInterrupt waits until no interrupt is open (one a held unknown
// outcome raised, from its own goroutine). Without one open it returns at
// once and adds nothing to history.
func (r *run) awaitNoInterrupt(ctx wf.Context) error {
	if r.interrupt == nil {
		return nil
	}
	return wf.Await(ctx, func() bool { return r.interrupt == nil })
}

// unknownCause says why err leaves an attempt's outcome unknown (its
// worker lost, after d; an error of type ErrAmbiguous), or "" when it
// does not; heartbeat, that the attempt was lost by its heartbeat.
func unknownCause(err error, d time.Duration) (cause string, heartbeat bool) {
	if err == nil {
		return "", false
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		switch te.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			return fmt.Sprintf("its attempt was lost: no heartbeat, %s after the call started", d.Round(time.Second)), true
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
			return fmt.Sprintf("its attempt was lost: start-to-close timeout, %s after the call started", d.Round(time.Second)), false
		}
		return "", false
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == protocol.ErrAmbiguous {
		return "ambiguous error: " + ae.Message(), false
	}
	return "", false
}

func outcomeUnknown(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, protocol.ErrOutcomeUnknown, nil)
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
	return wf.ExecuteActivity(wf.WithActivityOptions(ctx, o), protocol.CheckActivityName(in.Tool), in)
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
