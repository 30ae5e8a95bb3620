// Package calllog is the execution log's one writer. The run owns a Log;
// every call the run decides goes through it: a hook's cancel (Cancel),
// and each call it launches (Start: served from a record, or executed and
// recorded pending), settled when its future is read (Call.Settle), and,
// on a miss of a tool with records, explained (Call.Explain: the near
// miss). Nothing else appends to or changes the log.
//
// Start runs inside the SDK's workflow outbound interceptor (package
// intercept), which only routes a marked activity here: a served call
// returns an already-settled future and issues no command, so it adds no
// history event; other interceptors outside it still see the call.
//
// Replay runs the same workflow code against the same history, so it
// rebuilds the same log.
package calllog

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// Log is one run's execution log and the futures of its calls still
// executing (by record), which a twin in the same response is chained to.
type Log struct {
	d        *dedup.Log
	inflight map[int]workflow.Future
}

// New returns an empty log.
func New() *Log { return &Log{d: dedup.NewLog(), inflight: map[int]workflow.Future{}} }

// Records is the log to read (matching, snapshots, the near miss). Only
// this package writes it.
func (l *Log) Records() *dedup.Log { return l.d }

// Load replaces the log with one a run starts from (its thread's, or the
// one its predecessor carried), before the run's first call.
func (l *Log) Load(d *dedup.Log) { l.d = d }

// Mode is how a call meets the log.
type Mode uint8

const (
	// Matched: an idempotent tool's call, in a run not continued by a
	// resume: a matching record serves it; else it executes and is
	// recorded.
	Matched Mode = iota + 1
	// Recorded: executes and is recorded, never matched (a tool that is
	// not idempotent, or any call after a resume).
	Recorded
	// Unrecorded: executes and is never recorded (a held call a resume
	// performs).
	Unrecorded
)

// Call is one tool call the run launches, and what the log did with it.
type Call struct {
	Tool   string
	CallID string
	// Args are the post-hook arguments.
	Args *dedup.Args
	// Response is the log's response number of the call's model response.
	Response int
	Turn     int
	Run      string
	// Key is the downstream idempotency key the execution carries.
	Key  string
	Mode Mode
	// Resolve, when set, stands between the execution's future and
	// everything that reads it (the run, and a twin served while it runs):
	// it returns the future of the call's outcome (a tool whose unknown
	// outcomes its run checks).
	Resolve func(ctx workflow.Context, execution workflow.Future) workflow.Future

	// ServedFrom is the record that served the call, when one did.
	ServedFrom *dedup.Record
	// Relation is the rule ServedFrom matched under.
	Relation dedup.Relation
	// Recorded is the call's own record (nil when Unrecorded); pending
	// until Settle.
	Recorded *dedup.Record

	log *Log // set when Start saw the call
}

// Served reports whether a record served the call.
func (c *Call) Served() bool { return c.ServedFrom != nil }

type callKey struct{}

// Mark returns ctx marked with c: the activity the run starts with it is
// the call c, routed through Start by the interceptor.
func (l *Log) Mark(ctx workflow.Context, c *Call) workflow.Context {
	c.log = l
	return workflow.WithValue(ctx, callKey{}, c)
}

// CallOf is the call an activity context is marked with, or nil: for the
// interceptor, and for interceptors outside it (a replay recorder) to see,
// once ExecuteActivity returned, whether the call was served.
func CallOf(ctx workflow.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Start decides c: a Matched call that a record matches is served by a
// future settled from that record (or chained to its execution, still
// running) and run is not called; otherwise run starts the activity and c
// is recorded pending (unless Unrecorded), so that a twin later in the
// same response matches it while its body runs.
func (c *Call) Start(ctx workflow.Context, run func() workflow.Future) workflow.Future {
	l := c.log
	if c.Mode == Matched {
		if rec, rel := l.d.FindMatchingExecution(c.Tool, c.Args, c.Response); rec != nil {
			return l.serve(ctx, c, rec, rel)
		}
	}
	f := run()
	if c.Resolve != nil {
		// Unmarked: what Resolve starts is not this call again.
		f = c.Resolve(workflow.WithValue(ctx, callKey{}, (*Call)(nil)), f)
	}
	if c.Mode != Unrecorded {
		c.Recorded = l.d.AppendPending(dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn,
			CallID: c.CallID, Origin: dedup.Executed, Key: c.Key}, c.Args)
		l.inflight[c.Recorded.Seq] = f
	}
	return f
}

// Serve decides a call that no activity runs (a client tool's): a
// Matched call that a record matches is served as Start would serve it
// (a settled future, no command); otherwise it returns nil and records
// nothing (Complete records its outcome once known).
func (l *Log) Serve(ctx workflow.Context, c *Call) workflow.Future {
	c.log = l
	if c.Mode != Matched {
		return nil
	}
	rec, rel := l.d.FindMatchingExecution(c.Tool, c.Args, c.Response)
	if rec == nil {
		return nil
	}
	return l.serve(ctx, c, rec, rel)
}

// Complete records a call that no activity ran, with its outcome (a
// client tool's result, as the caller gave it): executed, settled. A
// call Unrecorded is not recorded.
func (l *Log) Complete(c *Call, result []byte, err *dedup.ToolError) {
	c.log = l
	if c.Mode == Unrecorded {
		return
	}
	c.Recorded = l.d.Append(dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn,
		CallID: c.CallID, Origin: dedup.Executed, Key: c.Key, Result: result, Error: err}, c.Args)
}

// serve answers c from rec without a command.
func (l *Log) serve(ctx workflow.Context, c *Call, rec *dedup.Record, rel dedup.Relation) workflow.Future {
	c.ServedFrom, c.Relation = rec, rel
	f, s := workflow.NewFuture(ctx)
	src := rec
	for src.Pending() && src.ServedFrom != nil { // served from a call still running
		src = l.d.At(*src.ServedFrom)
	}
	switch {
	case src.Pending():
		s.Chain(l.inflight[src.Seq])
	case src.Error != nil:
		s.SetError(temporal.NewNonRetryableApplicationError(src.Error.Message, src.Error.Type, nil))
	default:
		s.SetValue(activities.ToolOutput{Result: src.Result, ResultIn: src.ResultIn})
	}
	from := rec.Seq
	r := dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn, CallID: c.CallID,
		Origin: dedup.Cached, Result: src.Result, ResultIn: src.ResultIn, Error: src.Error, ServedFrom: &from, Relation: rel, Key: rec.Key}
	if src.Pending() {
		c.Recorded = l.d.AppendPending(r, c.Args)
	} else {
		c.Recorded = l.d.Append(r, c.Args)
	}
	return f
}

// ServeOrigin answers c, in a fork, from rec: a record of the thread the
// fork was made from (its origin), not of this log. No command is issued;
// c is recorded served (Relation dedup.FromOrigin, no ServedFrom: rec is
// not in this log), with rec's outcome and key, so that a later identical
// call of an idempotent tool matches it like any record; an Unrecorded
// call (a held call a resume performs) is not recorded.
func (l *Log) ServeOrigin(ctx workflow.Context, c *Call, rec *dedup.Record) workflow.Future {
	c.log = l
	c.ServedFrom, c.Relation = rec, dedup.FromOrigin
	f, s := workflow.NewFuture(ctx)
	if rec.Error != nil {
		s.SetError(temporal.NewNonRetryableApplicationError(rec.Error.Message, rec.Error.Type, nil))
	} else {
		s.SetValue(activities.ToolOutput{Result: rec.Result})
	}
	if c.Mode != Unrecorded {
		c.Recorded = l.d.Append(dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn, CallID: c.CallID,
			Origin: dedup.Cached, Result: rec.Result, Error: rec.Error, Relation: dedup.FromOrigin, Key: rec.Key}, c.Args)
	}
	return f
}

// Settle records a call's outcome once its future is read: the tool's
// output, or its final error. It does nothing for a call already settled,
// not recorded, or never started.
func (c *Call) Settle(out *activities.ToolOutput, err error) {
	if c.log == nil || c.Recorded == nil || !c.Recorded.Pending() {
		return
	}
	if err != nil {
		c.Recorded.Settle(nil, ToolErrorOf(err))
	} else if out != nil {
		c.Recorded.Settle(out.Result, nil)
	}
	delete(c.log.inflight, c.Recorded.Seq)
}

// NoteUnknown keeps on c's record, before Settle, that an attempt's
// outcome was unknown and how the run resolved it.
func (c *Call) NoteUnknown(u *dedup.Unknown) {
	if c.log != nil && c.Recorded != nil && c.Recorded.Pending() {
		c.Recorded.Unknown = u
	}
}

// Explain answers "why did it run again?" for an executed call of a tool
// with records: the nearest record and the rule that kept them apart (nil
// when there is none), also kept on the call's record. pre, when a hook
// rewrote the call, is its arguments as the model emitted them; matchable
// says whether the call could have been served (Mode Matched and an
// idempotent tool). The log alone decides it, so replay agrees.
func (c *Call) Explain(pre *dedup.Args, idempotent, matchable bool) *dedup.NearMiss {
	d := c.log.d
	before := d.Len()
	if c.Recorded != nil {
		before = c.Recorded.Seq
	}
	nm := d.NearestMiss(c.Tool, c.Args, pre, c.Response, before, idempotent, matchable)
	if nm != nil && c.Recorded != nil {
		c.Recorded.NearMiss = nm
	}
	return nm
}

// Cancel records a call a hook cancelled: with the model's arguments and
// the hook's message as its outcome, which an identical later call is
// served.
func (l *Log) Cancel(c Call, message string) {
	l.d.Append(dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn, CallID: c.CallID,
		Origin: dedup.Cancelled, Error: &dedup.ToolError{Type: dedup.ErrorTypeCancelled, Message: message}}, c.Args)
}

// MaxErrorMessage bounds a recorded error's message: a longer one is cut
// (at a character boundary) and says how long it was. What the model sees,
// the log and a served twin all get the same bounded text.
const MaxErrorMessage = 4 << 10

// ToolErrorOf turns an activity failure into the recorded error: the
// ApplicationError's type and message when there is one.
func ToolErrorOf(err error) *dedup.ToolError {
	var appErr *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	var canceled *temporal.CanceledError
	var te *dedup.ToolError
	switch {
	case errors.As(err, &appErr):
		te = &dedup.ToolError{Type: appErr.Type(), Message: appErr.Message()}
	case errors.As(err, &timeout):
		te = &dedup.ToolError{Type: "tulip.Timeout", Message: timeout.Error()}
	case errors.As(err, &canceled):
		// Recorded as runs always recorded it; tulip.KindOf reads it as
		// tulip.Cancelled.
		te = &dedup.ToolError{Type: "tulip.Canceled", Message: canceled.Error()}
	default:
		te = &dedup.ToolError{Type: protocol.ErrToolFailed, Message: err.Error()}
	}
	if n := len(te.Message); n > MaxErrorMessage {
		cut := MaxErrorMessage
		for cut > 0 && !utf8.RuneStart(te.Message[cut]) {
			cut--
		}
		te.Message = fmt.Sprintf("%s… (cut: %d bytes in all)", te.Message[:cut], n)
	}
	return te
}
