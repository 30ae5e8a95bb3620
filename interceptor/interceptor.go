// Package interceptor holds the dedup interceptor: a worker interceptor
// whose workflow outbound ExecuteActivity serves a matching idempotent tool
// call from the execution log, as an already-settled future (no command, so
// no history event), and records the outcome of every call it lets through.
//
// Workflow code reports an executed call's outcome with Call.Settle.
//
// The execution log lives in workflow state, owned by the interceptor. Replay
// runs the same workflow code against the same history, so it rebuilds the
// same log: a served call stays served.
//
// Workflow code marks a tool call by putting a *Call in the context it passes
// to workflow.ExecuteActivity (WithCall). Activities without a Call pass
// through untouched.
package interceptor

import (
	"errors"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/dedup"
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
	i := &workflowInbound{state: &State{log: dedup.NewLog()}}
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

// State is the dedup state of one workflow execution: its execution log.
type State struct {
	log *dedup.Log
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
	// Recorded is the call's own record, once settled (nil if not recorded).
	Recorded *dedup.Record

	log *dedup.Log // set when the interceptor lets the call execute
}

type callKey struct{}

// WithCall marks the activity started with the returned context as the tool
// call c. After reading the activity's result, call c.Settle.
func WithCall(ctx workflow.Context, c *Call) workflow.Context {
	return workflow.WithValue(ctx, callKey{}, c)
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	state *State
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	c, _ := ctx.Value(callKey{}).(*Call)
	if c == nil {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	log := o.state.log
	if c.Match {
		if rec, rel := log.FindMatchingExecution(c.Tool, c.Args, c.Response); rec != nil {
			c.ServedFrom, c.Relation = rec, rel
			if c.Record {
				from := rec.Seq
				c.Recorded = log.Append(dedup.Record{
					Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn, CallID: c.CallID,
					Origin: dedup.Served, Result: rec.Result, Error: rec.Error,
					ServedFrom: &from, Relation: rel, Key: rec.Key,
				}, c.Args)
			}
			f, s := workflow.NewFuture(ctx)
			if rec.Error != nil {
				s.SetError(temporal.NewNonRetryableApplicationError(rec.Error.Message, rec.Error.Type, nil))
			} else {
				s.SetValue(activities.ToolOutput{Result: rec.Result})
			}
			return f
		}
	}
	c.log = log
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

// Settle records an executed call's outcome: the tool's output, or its
// final error. Workflow code calls it once it has the activity's result.
// It does nothing for a served call, a call not to be recorded, or when the
// interceptor is not installed. (Recording here, rather than inside a
// wrapping future, keeps a frame off every coroutine yield, which the SDK
// walks.)
func (c *Call) Settle(out *activities.ToolOutput, err error) {
	if c.log == nil || c.ServedFrom != nil || !c.Record || c.Recorded != nil {
		return
	}
	rec := dedup.Record{Tool: c.Tool, Response: c.Response, Run: c.Run, Turn: c.Turn, CallID: c.CallID,
		Origin: dedup.Executed, Key: c.Key}
	if err != nil {
		rec.Error = ToolErrorOf(err)
	} else if out != nil {
		rec.Result = out.Result
	}
	c.Recorded = c.log.Append(rec, c.Args)
}

// ToolErrorOf turns an activity failure into the recorded error: the
// ApplicationError's type and message when there is one.
func ToolErrorOf(err error) *dedup.ToolError {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return &dedup.ToolError{Type: appErr.Type(), Message: appErr.Message()}
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return &dedup.ToolError{Type: "tulip.Timeout", Message: timeout.Error()}
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return &dedup.ToolError{Type: "tulip.Canceled", Message: canceled.Error()}
	}
	return &dedup.ToolError{Type: activities.ErrToolFailed, Message: err.Error()}
}
