package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/toolschema"
)

// ToolOptions are a tool's activity options. Zero values are documented per
// field.
type ToolOptions struct {
	// StartToCloseTimeout bounds one attempt. Zero value: 1 minute.
	StartToCloseTimeout time.Duration
	// RetryPolicy is Temporal's retry policy for the body; its attempts are
	// one execution. Zero value (nil): up to 3 attempts, 1 s initial
	// backoff.
	RetryPolicy *temporal.RetryPolicy
	// HeartbeatTimeout is how long an attempt may go without a heartbeat
	// before Temporal retries it (on another worker, when this one died).
	// tulip heartbeats from its own wrapper while the body runs, so bodies
	// need not. Zero value: DefaultHeartbeatTimeout. Negative: none (a
	// dead worker's attempt then waits out StartToCloseTimeout).
	HeartbeatTimeout time.Duration
	// Check answers, for a tool whose OnUnknown is OnUnknownCheck, whether
	// the service applied the execution in.IdempotencyKey: applied, with
	// the result the body would have returned (JSON), or not. It runs as
	// its own activity (CheckActivityName), up to 3 attempts, and its
	// error, after those, leaves the outcome unknown. Required
	// with OnUnknownCheck, refused without it.
	Check func(ctx context.Context, in ToolInput) (result json.RawMessage, applied bool, err error)
}

// CheckOutput is a check activity's result.
type CheckOutput struct {
	Applied bool            `json:"applied"`
	Result  json.RawMessage `json:"result,omitempty"`
}

// UnknownTimeouts are the failure types (Temporal's, of a lost attempt)
// that a tool with OnUnknownCheck does not retry: its run decides.
var UnknownTimeouts = []string{"TemporalTimeout:StartToClose", "TemporalTimeout:Heartbeat"}

// DefaultToolRetryPolicy applies when ToolOptions.RetryPolicy is nil.
var DefaultToolRetryPolicy = temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3}

// ToolInput is a tool activity's input.
type ToolInput struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	// Arguments is the post-hook argument text.
	Arguments string `json:"arguments"`
	// IdempotencyKey is the stable downstream key of this execution.
	IdempotencyKey string `json:"idempotency_key"`
	Agent          string `json:"agent"`
	Thread         string `json:"thread,omitempty"`
	// Toolset names the Toolset whose tool this is ("" for a Go tool).
	Toolset string `json:"toolset,omitempty"`
}

// ToolOutput is a tool activity's result: the body's result as JSON.
type ToolOutput struct {
	Result json.RawMessage `json:"result"`
	// ResultIn is set only by the dedup interceptor, on a call served from
	// a record whose result another run holds: the result is the content
	// of the conversation's message number ResultIn.
	ResultIn *int `json:"result_in,omitempty"`
}

// Tool is a declared tool: its spec, options and activity function. Make
// one with NewTool.
type Tool struct {
	spec     protocol.ToolSpec
	activity string // ToolActivityName(spec.Name), made once
	opts     ToolOptions
	fn       func(ctx context.Context, in ToolInput) (ToolOutput, error)
	sub      *SubAgent // a sub-agent tool's (subagent.go); it has no activity
}

// Spec returns the tool's spec.
func (t *Tool) Spec() protocol.ToolSpec { return t.spec }

// Options returns the tool's activity options with defaults applied.
func (t *Tool) Options() ToolOptions {
	o := t.opts
	if o.StartToCloseTimeout <= 0 {
		o.StartToCloseTimeout = time.Minute
	}
	if o.RetryPolicy == nil {
		rp := DefaultToolRetryPolicy
		o.RetryPolicy = &rp
	}
	if t.spec.OnUnknown == protocol.OnUnknownCheck || t.spec.OnUnknown == protocol.OnUnknownHold {
		// A lost attempt or an ambiguous error ends the activity: the
		// run checks before anything runs again.
		rp := *o.RetryPolicy
		rp.NonRetryableErrorTypes = append(slices.Clip(rp.NonRetryableErrorTypes), append(UnknownTimeouts, protocol.ErrAmbiguous)...)
		o.RetryPolicy = &rp
	}
	switch {
	case o.HeartbeatTimeout == 0:
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	case o.HeartbeatTimeout < 0:
		o.HeartbeatTimeout = 0
	}
	return o
}

// ActivityName is the tool's stable activity name.
func (t *Tool) ActivityName() string {
	if t.activity == "" { // a Tool not made by NewTool or ToolFromSpec
		return protocol.ToolActivityName(t.spec.Name)
	}
	return t.activity
}

// Activity is the function registered as the tool's activity.
func (t *Tool) Activity() func(ctx context.Context, in ToolInput) (ToolOutput, error) { return t.fn }

// CheckActivity is the function registered as the tool's check activity
// (CheckActivityName), or nil when the tool has no Check. The check reads
// the key as a body does (IdempotencyKey, CallInfo); a result that is not
// JSON fails it, non-retryably.
func (t *Tool) CheckActivity() func(ctx context.Context, in ToolInput) (CheckOutput, error) {
	if t.opts.Check == nil {
		return nil
	}
	return checkActivity(t.opts.Check)
}

// checkActivity runs check as a check activity: the key readable as a
// body reads it, heartbeats while it runs, its result JSON.
func checkActivity(check func(ctx context.Context, in ToolInput) (json.RawMessage, bool, error)) func(ctx context.Context, in ToolInput) (CheckOutput, error) {
	return func(ctx context.Context, in ToolInput) (CheckOutput, error) {
		ctx = context.WithValue(ctx, callKey{}, &in)
		ctx, stop := heartbeat(ctx)
		defer stop()
		res, applied, err := check(ctx, in)
		if err != nil {
			return CheckOutput{}, err
		}
		if !applied {
			return CheckOutput{}, nil
		}
		if len(res) == 0 {
			res = json.RawMessage("null")
		}
		if !json.Valid(res) {
			return CheckOutput{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("tool %s: the check's result is not JSON", in.Tool), protocol.ErrResultEncode, nil)
		}
		return CheckOutput{Applied: true, Result: res}, nil
	}
}

// checkOnUnknown refuses an OnUnknown that cannot work.
func checkOnUnknown(spec protocol.ToolSpec, opts ToolOptions) error {
	switch spec.OnUnknown {
	case "", protocol.OnUnknownRetry, protocol.OnUnknownHold:
		if opts.Check != nil {
			return fmt.Errorf("tulip: tool %q has a Check but OnUnknown %q: set OnUnknown to %q", spec.Name, spec.OnUnknown, protocol.OnUnknownCheck)
		}
	case protocol.OnUnknownCheck:
		if opts.Check == nil {
			return fmt.Errorf("tulip: tool %q: OnUnknown %q needs ToolOptions.Check", spec.Name, protocol.OnUnknownCheck)
		}
	default:
		return fmt.Errorf("tulip: tool %q: OnUnknown %q is not %q, %q or %q", spec.Name, spec.OnUnknown, protocol.OnUnknownRetry, protocol.OnUnknownCheck, protocol.OnUnknownHold)
	}
	if spec.Local && (spec.OnUnknown == protocol.OnUnknownCheck || spec.OnUnknown == protocol.OnUnknownHold) {
		return fmt.Errorf("tulip: tool %q: a Local tool's lost attempt runs again with its workflow task; OnUnknown %q needs an activity", spec.Name, spec.OnUnknown)
	}
	return nil
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewTool declares a tool whose body takes typed arguments. The argument
// text is decoded into T with encoding/json; a decode failure is the body's
// error (non-retryable, type ErrArgumentDecode). The body's result is
// encoded as JSON. The body reads its downstream key with IdempotencyKey.
//
// The schema the model is shown, spec.Parameters, comes from T when the
// spec has none: a struct is an object whose properties are its fields as
// encoding/json names them (the json tag; omitempty or omitzero makes one
// optional; embedded structs' fields are promoted), with a field's
// jsonschema tag as its description; a pointer field also takes null;
// maps are objects, slices and arrays arrays, time.Time a date-time
// string, and any or json.RawMessage any value (and, as T itself, any
// object). A T that is not read from a JSON object, a field JSON cannot
// hold (a channel, a function) and a recursive type have no schema: write
// spec.Parameters by hand (or tag the field json:"-").
//
// A hand-written spec.Parameters is checked against T: a property T has no
// field for, a field it does not name, a required name T has no field
// for, or a "type" or "enum" its field cannot hold fails the declaration
// with a *ToolSchemaError naming the tool and each property (nested
// objects are checked when the schema lists their properties; a T of any,
// json.RawMessage or a map takes any object).
func NewTool[T, R any](spec protocol.ToolSpec, body func(ctx context.Context, args T) (R, error), opts ...ToolOptions) (*Tool, error) {
	if !toolName.MatchString(spec.Name) {
		return nil, fmt.Errorf("tulip: tool name %q must be 1-64 letters, digits, '_' or '-'", spec.Name)
	}
	if body == nil {
		return nil, fmt.Errorf("tulip: tool %q has no body", spec.Name)
	}
	if len(spec.Parameters) > 0 && !json.Valid(spec.Parameters) {
		return nil, fmt.Errorf("tulip: tool %q: parameters are not valid JSON", spec.Name)
	}
	if len(spec.Parameters) == 0 {
		p, err := toolschema.Infer(reflect.TypeFor[T]())
		if err != nil {
			return nil, &ToolSchemaError{Tool: spec.Name, Err: err}
		}
		spec.Parameters = p
	} else if err := toolschema.Check(spec.Parameters, reflect.TypeFor[T]()); err != nil {
		return nil, &ToolSchemaError{Tool: spec.Name, Err: err}
	}
	if len(opts) > 1 {
		return nil, fmt.Errorf("tulip: tool %q: at most one ToolOptions", spec.Name)
	}
	t := &Tool{spec: spec, activity: protocol.ToolActivityName(spec.Name)}
	if len(opts) == 1 {
		t.opts = opts[0]
	}
	if err := checkOnUnknown(spec, t.opts); err != nil {
		return nil, err
	}
	t.fn = func(ctx context.Context, in ToolInput) (ToolOutput, error) {
		var args T
		if err := json.Unmarshal([]byte(in.Arguments), &args); err != nil {
			return ToolOutput{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("tool %s: arguments do not decode: %v", spec.Name, err), protocol.ErrArgumentDecode, err)
		}
		ctx = context.WithValue(ctx, callKey{}, &in)
		ctx, stop := heartbeat(ctx)
		defer stop()
		start := time.Now()
		res, err := body(ctx, args)
		if activity.IsActivity(ctx) {
			outcome := "ok"
			if err != nil {
				outcome = "error"
			}
			activity.GetMetricsHandler(ctx).WithTags(map[string]string{"tool": spec.Name, "outcome": outcome}).
				Timer(protocol.MetricToolLatency).Record(time.Since(start))
		}
		if err != nil {
			return ToolOutput{}, err
		}
		b, err := json.Marshal(res)
		if err != nil {
			return ToolOutput{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("tool %s: result does not encode as JSON: %v", spec.Name, err), protocol.ErrResultEncode, err)
		}
		return ToolOutput{Result: b}, nil
	}
	return t, nil
}

// ToolSchemaError says why NewTool cannot give a tool its Parameters: no
// schema can be inferred from its argument type, or the hand-written one
// disagrees with it. Err says where, property by property.
type ToolSchemaError struct {
	Tool string
	Err  error
}

func (e *ToolSchemaError) Error() string { return fmt.Sprintf("tulip: tool %q: %v", e.Tool, e.Err) }

func (e *ToolSchemaError) Unwrap() error { return e.Err }

// LimitResult wraps a tool activity function: a result over limit bytes
// (the worker's payload limit; zero or negative: none) fails the call with
// ErrPayloadTooLarge, non-retryably, as its recorded outcome, instead of a
// completion the server refuses (and Temporal retries, running the body
// again).
func LimitResult(tool string, limit int, fn func(context.Context, ToolInput) (ToolOutput, error)) func(context.Context, ToolInput) (ToolOutput, error) {
	if limit <= 0 {
		return fn
	}
	return func(ctx context.Context, in ToolInput) (ToolOutput, error) {
		out, err := fn(ctx, in)
		if err == nil {
			err = checkPayload(fmt.Sprintf("tool %s's result", tool), out, limit)
		}
		return out, err
	}
}

// checkPayload fails with ErrPayloadTooLarge when v's JSON is over limit.
func checkPayload(what string, v any, limit int) error {
	if limit <= 0 {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) <= limit {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s is %.1f MiB, over the %.1f MiB payload limit: configure external storage on the client and set the worker's PayloadLimit to -1",
			what, float64(len(b))/(1<<20), float64(limit)/(1<<20)), protocol.ErrPayloadTooLarge, nil)
}

// MustTool is NewTool that panics on a declaration error, for package-level
// tool variables.
func MustTool[T, R any](spec protocol.ToolSpec, body func(ctx context.Context, args T) (R, error), opts ...ToolOptions) *Tool {
	t, err := NewTool(spec, body, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

type callKey struct{}

// IdempotencyKey returns the stable downstream idempotency key of the tool
// execution running in ctx, or "" outside a tool body. It is the same on
// every attempt, after a worker crash, on replay and after a thread reload;
// send it to the service the tool calls.
func IdempotencyKey(ctx context.Context) string {
	if in, ok := ctx.Value(callKey{}).(*ToolInput); ok {
		return in.IdempotencyKey
	}
	return ""
}

// CallInfo returns the input of the tool execution running in ctx.
func CallInfo(ctx context.Context) (ToolInput, bool) {
	in, ok := ctx.Value(callKey{}).(*ToolInput)
	if !ok {
		return ToolInput{}, false
	}
	return *in, true
}

// ToolError makes a tool failure with a stable type; nonRetryable failures
// are not attempted again by Temporal (and, like any failure, are recorded
// and served again to an identical call).
func ToolError(message, errType string, nonRetryable bool) error {
	if nonRetryable {
		return temporal.NewNonRetryableApplicationError(message, errType, nil)
	}
	return temporal.NewApplicationError(message, errType)
}

// IdempotencyKeyHeader is the HTTP header SetIdempotencyKeyHeader sets.
const IdempotencyKeyHeader = "Idempotency-Key"

// SetIdempotencyKeyHeader sets the Idempotency-Key header of req to the
// downstream key of the tool execution running in ctx. It fails outside a
// tool body, so that no request goes out without its key.
func SetIdempotencyKeyHeader(ctx context.Context, req *http.Request) error {
	key := IdempotencyKey(ctx)
	if key == "" {
		return errors.New("tulip: no idempotency key: not inside a tool body")
	}
	req.Header.Set(IdempotencyKeyHeader, key)
	return nil
}
