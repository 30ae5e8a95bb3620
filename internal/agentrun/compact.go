package agentrun

import (
	"errors"
	"strconv"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Compaction keeps a long conversation within its model's context budget
// (docs/context.md). The execution log is not the conversation: only what
// the model is sent is compacted, and the log, which decides what runs,
// stays whole.
//
// Before a model call the run estimates what it would send: the last
// call's measure (the provider's prompt tokens) plus the bytes added since,
// over 4. Past CompactAt of the budget, it asks its model, by an activity
// (SummarizeActivity: recorded once, never asked again on replay), for a
// summary of the oldest messages, keeping the last KeepResponses model
// responses with their tool results whole; the model is then sent the
// summary in their place. A call the model activity or the provider
// refuses as too long (ErrContextTooLong) compacts down to the last
// response and is asked again, once.

// Compaction is one compaction of a run (RunResult.Compactions).
type Compaction struct {
	// Turn is the run's turn whose model call it preceded.
	Turn int `json:"turn"`
	// Upto: the model is sent the summary in place of messages [0, Upto)
	// of the thread's conversation (Replaced of them new to this one).
	Upto     int `json:"upto"`
	Replaced int `json:"replaced"`
	// Estimate is the tokens the call would have sent, and Budget the
	// model's; TooLong: the model call was refused as too long.
	Estimate int  `json:"estimate"`
	Budget   int  `json:"budget"`
	TooLong  bool `json:"too_long,omitempty"`
	// Usage is what asking for the summary cost.
	Usage *threadstate.Usage `json:"usage,omitempty"`
}

const (
	// CompactAt is the share of the budget past which a call compacts
	// first (80%).
	compactAtPercent = 80
	// KeepResponses is how many of the last model responses (each with
	// its tool results) a compaction keeps whole.
	KeepResponses = 4
)

// adoptContext takes the thread state's view (nil: none yet).
func (r *run) adoptContext(cs *threadstate.ContextState) {
	r.mview = threadstate.ContextState{}
	if cs != nil {
		r.mview = *cs
	}
}

// contextState is the view for the thread's state (nil while it is
// empty).
func (r *run) contextState() *threadstate.ContextState {
	if r.mview == (threadstate.ContextState{}) {
		return nil
	}
	v := r.mview
	return &v
}

// compaction is what the next model call sends in place of the
// conversation's start, or nil.
func (r *run) compaction() *activities.Compaction {
	if r.mview.Upto == 0 {
		return nil
	}
	return &activities.Compaction{Upto: r.mview.Upto, Summary: r.mview.Summary}
}

// measured takes a model call's measure (before its answer joins the
// conversation).
func (r *run) measured(at int, c *activities.ContextReport) {
	if c == nil {
		return
	}
	if c.Budget > 0 {
		r.mview.Budget = c.Budget
	}
	r.mview.Sent, r.mview.At = c.Sent, at
}

// estimate is what the next model call would send: the last call's
// measure and the bytes added since. -1: unknown (no call measured since
// this run's state was loaded past it).
func (r *run) estimate() int {
	if r.mview.At < r.base || r.mview.At > r.convLen() {
		return -1
	}
	n := 0
	for i := r.mview.At - r.base; i < len(r.messages); i++ {
		n += activities.MessageBytes(&r.messages[i])
	}
	return r.mview.Sent + (n+3)/4
}

// compactIfNear compacts before a model call that would pass CompactAt of
// its model's budget. Runs recorded before "tulip-compaction" never
// compacted.
func (r *run) compactIfNear(ctx wf.Context) error {
	est := r.estimate()
	if r.mview.Budget <= 0 || est*100 <= r.mview.Budget*compactAtPercent {
		return nil
	}
	if !r.compactionOn(ctx) {
		return nil
	}
	// Keep fewer responses when the kept ones alone would fill half the
	// budget: else the next call compacts again at once.
	keep := KeepResponses
	for keep > 1 && r.tokensFrom(r.boundary(keep))*2 > r.mview.Budget {
		keep--
	}
	return r.compact(ctx, keep, est, false)
}

// tokensFrom estimates the messages from conversation number at on (this
// run holds them).
func (r *run) tokensFrom(at int) int {
	n := 0
	for i := max(at-r.base, 0); i < len(r.messages); i++ {
		n += activities.MessageBytes(&r.messages[i])
	}
	return (n + 3) / 4
}

// compactionOn reports whether this run compacts (its history's gate).
func (r *run) compactionOn(ctx wf.Context) bool {
	return r.version(ctx, "tulip-compaction") == 1
}

// tooLong reports whether err is a model call refused as too long.
func tooLong(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrContextTooLong
}

// compact asks for a summary of the messages before the last keep model
// responses (at least one message more than the view replaces already)
// and sends it in their place from now on. Nothing to compact is no
// error: the call goes as it is.
func (r *run) compact(ctx wf.Context, keep, est int, refused bool) error {
	upto := r.boundary(keep)
	if upto <= r.mview.Upto {
		return nil
	}
	var input any
	if wf.IsReplaying(ctx) {
		input = r.unsent()
	} else {
		in := activities.ModelInput{Model: r.in.Model, Agent: r.in.Agent, Thread: r.in.ThreadID, Turn: r.turn,
			Phase: r.phase, PhaseTurn: r.phaseTurn, Cursor: true, Digest: r.convDigest()}
		if sent := r.sentCursor(); sent.Count > 0 {
			in.Base = &sent
		}
		in.New = r.messages[r.sent.Count-r.base:]
		input = activities.SummarizeInput{Conversation: in, From: r.mview.Upto, Upto: upto, Previous: r.mview.Summary, Budget: r.mview.Budget}
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout:    DefaultModelTimeout,
		HeartbeatTimeout:       activities.DefaultHeartbeatTimeout,
		RetryPolicy:            retryUntilWindow(),
		ScheduleToCloseTimeout: RetryWindow + DefaultModelTimeout,
	})
	var out activities.SummarizeOutput
	if err := wf.ExecuteActivity(actx, activities.SummarizeActivity, input).Get(ctx, &out); err != nil {
		return err
	}
	r.usage = r.usage.Add(out.Usage)
	r.compacted = append(r.compacted, Compaction{Turn: r.turn, Upto: upto, Replaced: upto - r.mview.Upto, Estimate: est,
		Budget: r.mview.Budget, TooLong: refused, Usage: out.Usage})
	if r.stream != nil {
		r.stream.PublishLazy(protocol.TopicContext, r.compacted[len(r.compacted)-1])
	}
	r.mview.Upto, r.mview.Summary = upto, out.Summary
	r.mview.Compactions++
	// The next measure is the summary and what follows it.
	r.mview.Sent, r.mview.At = (len(out.Summary)+64+3)/4+r.tokensFrom(upto), r.convLen()
	r.count(ctx, "compaction/"+strconv.Itoa(r.mview.Compactions), MetricCompactions, 1)
	return nil
}

// boundary is where a compaction keeping the last keep model responses
// ends: the conversation's number of the keep-th last assistant message
// this run holds, or, when this run holds fewer, the start of this run's
// messages. Messages before it are summarized; every call of a kept
// response keeps its results (a response's tool messages follow it).
func (r *run) boundary(keep int) int {
	seen := 0
	for i := len(r.messages) - 1; i >= 0; i-- {
		if r.messages[i].Role == "assistant" {
			if seen++; seen == keep {
				return r.base + i
			}
		}
	}
	return r.base
}
