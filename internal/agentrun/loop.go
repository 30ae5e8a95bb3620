package agentrun

import (
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// loop asks the model for responses and handles their calls until a final
// answer, the turn limit, or a continue-as-new.
func (r *run) loop(ctx wf.Context) error {
	hb := r.cfg.ModelHeartbeatTimeout
	switch {
	case hb == 0:
		hb = activities.DefaultHeartbeatTimeout
	case hb < 0:
		hb = 0
	}
	// One attempt may take ModelTimeout (a long answer streams for
	// minutes): the heartbeat, sent while it runs, finds a dead worker,
	// and the model adapter's idle timeout a stalled model.
	attempt := r.cfg.ModelTimeout
	if attempt <= 0 {
		attempt = DefaultModelTimeout
	}
	mctx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout: attempt,
		HeartbeatTimeout:    hb,
		RetryPolicy:         retryUntilWindow(),
		// Attempts end early when a worker dies (heartbeat) or a service
		// restarts: the window, not a count, bounds them (and lets the
		// last attempt run whole).
		ScheduleToCloseTimeout: RetryWindow + attempt,
	})
	// Runs recorded before calls ran at once replay sequentially.
	r.parallelCalls = r.version(ctx, "tulip-parallel-calls") == 1 && !r.in.SequentialCalls
	for {
		if r.turn >= r.in.MaxTurns {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the run reached its limit of %d model turns", r.in.MaxTurns), protocol.ErrMaxTurns, nil)
		}
		if r.shouldContinueAsNew(ctx) {
			return r.continueAsNew(ctx)
		}
		if err := r.checkBudget(ctx, 0); err != nil {
			return err
		}
		r.turn++
		r.runTurns++
		r.phaseTurn++
		r.drainSignals(ctx)
		resp, err := r.callModel(ctx, mctx)
		if err != nil {
			return err
		}
		r.usage = r.usage.Add(resp.Usage)
		r.publishAnswer(resp)
		if err := r.changeHooks(HooksInput{Install: resp.InstallHooks, Remove: resp.RemoveHooks}); err != nil {
			return err
		}
		response := r.log.BeginResponse()
		r.addMessage(activities.AssistantMessage(resp))
		if r.carriesThread {
			// The model activity knows its own answer: the next call's
			// cursor starts after it.
			r.markSent()
		}
		if len(resp.ToolCalls) == 0 {
			r.answer = resp.Text
			return nil
		}
		if err := r.checkBudget(ctx, len(resp.ToolCalls)); err != nil {
			return err
		}
		// Room for the response's lines and tool messages, made once.
		n := len(resp.ToolCalls)
		r.trace, r.traceMsg, r.messages = slices.Grow(r.trace, n), slices.Grow(r.traceMsg, n), slices.Grow(r.messages, n)
		var steps []*step
		for i, call := range resp.ToolCalls {
			r.drainSignals(ctx)
			st, h := r.handleCall(ctx, call, response)
			if st == nil && h == nil {
				continue // a client tool's call, held for the caller
			}
			if h != nil {
				r.finish(ctx, steps) // what started before the interrupt settles first
				steps = nil
				if err := r.pause(ctx, h, resp.ToolCalls[i:], response); err != nil {
					return err
				}
				break
			}
			steps = r.enqueue(ctx, steps, st)
		}
		r.finish(ctx, steps)
		if len(r.clientHeld) > 0 {
			if err := r.awaitClient(ctx); err != nil {
				return err
			}
		}
	}
}

// callModel asks the model for the run's next response, compacting its
// view of the conversation first when the call would come near its
// budget, and once more (then asking again, once) when the call is
// refused as too long (compact.go).
func (r *run) callModel(ctx, mctx wf.Context) (activities.ModelResponse, error) {
	if r.carriesThread && !r.in.NoCompaction {
		if err := r.compactIfNear(ctx); err != nil {
			return activities.ModelResponse{}, err
		}
	}
	at := r.convLen()
	resp, err := r.askModel(ctx, mctx)
	if err != nil && r.carriesThread && !r.in.NoCompaction && tooLong(err) && r.compactionOn(ctx) {
		var app *temporal.ApplicationError
		est := r.estimate()
		if errors.As(err, &app) && app.HasDetails() {
			var rep activities.ContextReport
			if app.Details(&rep) == nil {
				est = rep.Sent
				switch {
				case rep.Budget > 0:
					r.mview.Budget = rep.Budget
				case r.mview.Budget == 0 && est > 0:
					// Learned from the refusal: the model takes less
					// than this request.
					r.mview.Budget = est * 9 / 10
				}
			}
		}
		upto := r.mview.Upto
		if cerr := r.compact(ctx, 1, est, true); cerr != nil {
			return activities.ModelResponse{}, cerr
		}
		if r.mview.Upto > upto { // something was compacted: once more
			resp, err = r.askModel(ctx, mctx)
		}
	}
	if err != nil {
		return activities.ModelResponse{}, err
	}
	r.measured(at, resp.Context)
	return resp, nil
}

// askModel makes one model call.
func (r *run) askModel(ctx, mctx wf.Context) (activities.ModelResponse, error) {
	var resp activities.ModelResponse
	start := wf.Now(ctx)
	var input any
	if wf.IsReplaying(ctx) {
		// The command is matched, never sent (calls.go): no input is
		// made, and the cursor's digest waits until it is read.
		input = r.unsent()
		if r.carriesThread {
			r.markSent()
		}
	} else {
		input = r.modelInput()
	}
	if err := wf.ExecuteActivity(mctx, protocol.ModelActivity, input).Get(ctx, &resp); err != nil {
		r.observeModel(ctx, start, 0, err)
		return resp, err
	}
	r.observeModel(ctx, start, len(resp.ToolCalls), nil)
	return resp, nil
}

// modelInput is the next model call's input: a cursor over what the last
// call saw, and only the messages added since (legacy runs: everything).
func (r *run) modelInput() activities.ModelInput {
	in := activities.ModelInput{Model: r.in.Model, Agent: r.in.Agent, Thread: r.in.ThreadID, Turn: r.turn,
		Phase: r.phase, PhaseTurn: r.phaseTurn, TextStream: r.textStream(),
		Instructions: r.in.Instructions, Params: r.in.Params, ClientTools: r.clientSpecs, Offered: r.offered, Compaction: r.compaction()}
	if !r.carriesThread {
		in.Messages = r.messages
		for _, t := range r.cfg.Tools {
			if r.offered == nil || r.tools[t.Spec().Name] != nil {
				in.Tools = append(in.Tools, t.Spec())
			}
		}
		return in
	}
	if sent := r.sentCursor(); sent.Count > 0 {
		in.Base = &sent
	}
	in.Cursor = true
	in.New = r.messages[r.sent.Count-r.base:]
	in.Digest = r.convDigest()
	r.setSent(activities.Cursor{Count: r.convLen(), Digest: in.Digest})
	return in
}

// addMessage appends to the conversation; its digest takes it when next
// read (convDigest).
func (r *run) addMessage(m threadstate.Message) {
	r.messages = append(r.messages, m)
	if r.carriesThread {
		r.undigested++
	}
}

// convDigest is the whole conversation's digest: the messages added
// since it was last read extend it now, all at once (one call's
// response adds a message a call).
func (c *conversation) convDigest() string {
	c.sentCursor() // its digest is on the way
	c.foldTo(c.convLen())
	return c.digest
}

// foldTo extends the digest over the undigested messages before message
// count.
func (c *conversation) foldTo(count int) {
	if n := count - (c.convLen() - c.undigested); n > 0 {
		from := len(c.messages) - c.undigested
		c.digest = threadstate.ExtendDigest(c.digest, c.messages[from:from+n]...)
		c.undigested -= n
	}
}

// markSent records that a model call saw the whole conversation; the
// cursor's digest is folded when it is read (sentCursor): while a run
// replays, no model input reads it.
func (c *conversation) markSent() {
	c.sent, c.sentPending = activities.Cursor{Count: c.convLen()}, true
}

// setSent sets the last model call's cursor.
func (c *conversation) setSent(cur activities.Cursor) { c.sent, c.sentPending = cur, false }

// sentCursor is the conversation the last model call saw, its digest
// folded.
func (c *conversation) sentCursor() activities.Cursor {
	if c.sentPending {
		c.foldTo(c.sent.Count)
		c.sent.Digest, c.sentPending = c.digest, false
	}
	return c.sent
}
