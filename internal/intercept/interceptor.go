// Package intercept holds the dedup interceptor: a worker interceptor
// whose workflow outbound ExecuteActivity serves a matching idempotent tool
// call from the execution log, as an already-settled future (no command, so
// no history event), and records the outcome of every call it lets through.
//
// Workflow code reports each call's outcome with Call.Settle once it has
// read the future. Calls of one response may run at once: an executing call
// is recorded as pending, and a twin of it in the same response is served
// by a future chained to the original's.
//
// The execution log lives in workflow state, owned by the interceptor. Replay
// runs the same workflow code against the same history, so it rebuilds the
// same log: a served call stays served.
//
// Workflow code marks a tool call by putting a *Call in the context it passes
// to workflow.ExecuteActivity (WithCall). Activities without a Call pass
// through untouched.
package intercept

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
)

// Interceptor is the dedup worker interceptor. The zero value is ready; use
// New.
type Interceptor struct {
	interceptor.WorkerInterceptorBase
}

var _ interceptor.WorkerInterceptor = (*Interceptor)(nil)

// New returns the dedup worker interceptor.
func New() *Interceptor { return &Interceptor{} }

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (*Interceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowInbound{state: &State{log: dedup.NewLog(), inflight: map[int]workflow.Future{}}}
	i.Next = next
	return i
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	state *State
}

func (i *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &workflowOutbound{state: i.state}
	o.Next = outbound
	return i.Next.Init(o)
}

func (i *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflow.WithValue(ctx, stateKey{}, i.state), in)
}

// State is the dedup state of one workflow execution: its execution log,
// and the futures of the calls still executing (by record), which a twin in
// the same response is chained to.
type State struct {
	log      *dedup.Log
	inflight map[int]workflow.Future
}

type stateKey struct{}

// StateFrom returns the workflow's dedup state, or nil when the interceptor
// is not installed (then every call executes and nothing is recorded).
func StateFrom(ctx workflow.Context) *State {
	s, _ := ctx.Value(stateKey{}).(*State)
	return s
}

// Log returns the execution log.
func (s *State) Log() *dedup.Log { return s.log }

// SetLog replaces the execution log (a thread's checkpoint, at run start).
func (s *State) SetLog(l *dedup.Log) { s.log = l }

// Call describes one tool call to the interceptor, and carries back what it
// did.
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
	Key string
	// Match: look for a matching record first (an idempotent tool, in a run
	// not continued by resume).
	Match bool
	// Record: record the outcome (false for dangling calls run by resume).
	Record bool

	// ServedFrom is the record that served the call, when one did.
	ServedFrom *dedup.Record
	// Relation is the rule ServedFrom matched under.
	Relation dedup.Relation
	// Recorded is the call's own record (nil if not recorded); pending
	// until Settle.
	Recorded *dedup.Record

	state *State // set when the interceptor has seen the call
}

type callKey struct{}

// WithCall marks the activity started with the returned context as the tool
// call c. After reading the activity's result, call c.Settle.
func WithCall(ctx workflow.Context, c *Call) workflow.Context {
	return workflow.WithValue(ctx, callKey{}, c)
}

// CallOf is the tool call an activity context carries (WithCall), or nil:
// for interceptors outside this one (a replay recorder) to see, once
// ExecuteActivity returned, whether the call was served (ServedFrom).
func CallOf(ctx workflow.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	state *State
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	return o.call(ctx, func() workflow.Future { return o.Next.ExecuteActivity(ctx, activityType, args...) })
}

// ExecuteLocalActivity is ExecuteActivity for a tool declared Local: the
// same matching and log.
func (o *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	return o.call(ctx, func() workflow.Future { return o.Next.ExecuteLocalActivity(ctx, activityType, args...) })
}

// call serves a tool call from the log, or runs it (run) and records it.
func (o *workflowOutbound) call(ctx workflow.Context, run func() workflow.Future) workflow.Future {
	c, _ := ctx.Value(callKey{}).(*Call)
	if c == nil {
		return run()
	}
	st, log := o.state, o.state.log
	c.state = st
	if c.Match {
		if rec, rel := log.FindMatchingExecution(c.Tool, c.Args, c.Response); rec != nil {
			return o.serve(ctx, c, rec, rel)
		}
	}
	f := run()
	if c.Record {
		// Recorded now, settled by Settle: a twin later in the same
		// response matches it while the body is still running.
		c.Recorded = log.AppendPending(dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn,
			CallID: c.CallID, Origin: dedup.Executed, Key: c.Key}, c.Args)
		st.inflight[c.Recorded.Seq] = f
	}
	return f
}

// serve answers c from rec without a command: an already-settled future, or
// for a record still executing, a future chained to that execution's.
func (o *workflowOutbound) serve(ctx workflow.Context, c *Call, rec *dedup.Record, rel dedup.Relation) workflow.Future {
	c.ServedFrom, c.Relation = rec, rel
	f, s := workflow.NewFuture(ctx)
	src := rec
	for src.Pending() && src.ServedFrom != nil { // served from a call still running
		src = o.state.log.At(*src.ServedFrom)
	}
	switch {
	case src.Pending():
		s.Chain(o.state.inflight[src.Seq])
	case src.Error != nil:
		s.SetError(temporal.NewNonRetryableApplicationError(src.Error.Message, src.Error.Type, nil))
	default:
		s.SetValue(activities.ToolOutput{Result: src.Result, ResultIn: src.ResultIn})
	}
	if c.Record {
		from := rec.Seq
		r := dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn, CallID: c.CallID,
			Origin: dedup.Served, Result: src.Result, ResultIn: src.ResultIn, Error: src.Error, ServedFrom: &from, Relation: rel, Key: rec.Key}
		if src.Pending() {
			c.Recorded = o.state.log.AppendPending(r, c.Args)
		} else {
			c.Recorded = o.state.log.Append(r, c.Args)
		}
	}
	return f
}

// Settle records a call's outcome once its future is read: the tool's
// output, or its final error. Workflow code calls it after Get. It does
// nothing for a call already settled or not recorded, or when the
// interceptor is not installed.
func (c *Call) Settle(out *activities.ToolOutput, err error) {
	if c.state == nil || c.Recorded == nil || !c.Recorded.Pending() {
		return
	}
	if err != nil {
		c.Recorded.Settle(nil, ToolErrorOf(err))
	} else if out != nil {
		c.Recorded.Settle(out.Result, nil)
	}
	delete(c.state.inflight, c.Recorded.Seq)
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
		te = &dedup.ToolError{Type: "tulip.Canceled", Message: canceled.Error()}
	default:
		te = &dedup.ToolError{Type: activities.ErrToolFailed, Message: err.Error()}
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
