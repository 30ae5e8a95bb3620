package tulip

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// Toolset is a set of tools: a Go tool made with NewTool (a set of one), an
// MCP server (module github.com/tulip-temporal/tulip/mcp), or your
// own. Options.Tools takes any mix; a tool name must be unique across all
// of them (NewPlugin refuses a clash, and a run refuses one it lists).
//
// A run reads its toolsets' lists once, in an activity, before its first
// model call, so the list a run uses is in its history: a replay and every
// other worker see the same tools whatever a toolset lists later.
//
// A Toolset that also has the method
//
//	Check(ctx context.Context, in ToolInput) (result json.RawMessage, applied bool, err error)
//
// may list tools whose OnUnknown is "check": it answers for them as
// ToolOptions.Check does for a Go tool (an MCP server names a tool of its
// own for it).
type Toolset interface {
	// Name names the toolset; unique among a worker's toolsets.
	Name() string
	// Tools lists the toolset's tools as tulip will use them: Name,
	// Description and Parameters as the model is shown them, and
	// Idempotent and Approval already decided. A name must not clash with
	// another toolset's tool or a Go tool. Implementations may cache the
	// list.
	Tools(ctx context.Context) ([]ToolSpec, error)
	// Call runs the tool in.Tool with in.Arguments (a JSON object's text)
	// and returns its result as JSON. in.IdempotencyKey is the downstream
	// key: send it to the service. A tool failure is an error (ToolError
	// for a typed one); it is the call's recorded outcome like a Go
	// tool's.
	Call(ctx context.Context, in ToolInput) (ToolOutput, error)
}

// Tool is a Go function tool: its spec, its activity options and its body.
// It is a Toolset of one tool. Make one with NewTool or MustTool.
type Tool struct{ t *activities.Tool }

// Name is the tool's name.
func (t *Tool) Name() string { return t.t.Name() }

// Spec is the tool's spec as the model is shown it: Parameters inferred
// from the body's argument type when the spec gave none.
func (t *Tool) Spec() ToolSpec { return ToolSpec(t.t.Spec()) }

// Tools lists the one tool.
func (t *Tool) Tools(context.Context) ([]ToolSpec, error) {
	return []ToolSpec{ToolSpec(t.t.Spec())}, nil
}

// Call runs the tool's body.
func (t *Tool) Call(ctx context.Context, in ToolInput) (ToolOutput, error) {
	out, err := t.t.Call(ctx, activities.ToolInput(in))
	return ToolOutput{Result: out.Result}, err
}

// ToolSpec describes a tool to the model and to the execution log.
type ToolSpec struct {
	// Name is the tool's name, as the model calls it. Required.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments object. NewTool
	// infers it from the body's argument type when it is empty, and checks
	// it against that type when it is given. Zero value in a toolset's
	// spec: any object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Idempotent: an identical later call in the run (and on its thread)
	// is served from the execution log, and the body does not run again.
	Idempotent bool `json:"idempotent,omitempty"`
	// KeyTemplate, when set, makes the downstream idempotency key from the
	// arguments instead of the default derivation: "{name}" is replaced by
	// the top-level argument name (strings as is, numbers by exact value,
	// so 120 and 120.0 give the same key). Example: "refund:{order_id}:v1".
	KeyTemplate string `json:"key_template,omitempty"`
	// Approval: every call of the tool waits for a person's approval (the
	// run is interrupted before it, as by a hook) before it runs. Toolsets
	// set it for destructive tools.
	Approval bool `json:"approval,omitempty"`
	// Toolset names the Toolset the tool comes from ("" for a Go tool).
	Toolset string `json:"toolset,omitempty"`
	// Local runs the tool as a local activity, for quick work (reads,
	// side-effect-free lookups): the worker that runs the workflow task
	// runs the body itself, and its outcome is one marker event. Matching,
	// the log, keys and trace lines are the same. A worker that dies while
	// it runs makes the task time out, and the next worker runs the body
	// again. Keep Local bodies to a few seconds, and do not change Local
	// for runs in flight (their replay expects the other event). Zero: a
	// normal activity.
	Local bool `json:"local,omitempty"`
	// OnUnknown is what a run does when an attempt of the tool started and
	// its outcome is unknown: its worker was lost (heartbeat or
	// start-to-close timeout) or the body returned a ToolError of kind
	// Ambiguous. A clean error from the body is never unknown.
	//   - "" or "retry": Temporal runs the attempt again with the same key,
	//     for services that honour it.
	//   - "check": ToolOptions.Check asks the service whether the key was
	//     applied. Its answer is the call's outcome, and the call runs
	//     again (same key) only when it was not.
	//   - "hold": the run is interrupted (hook "tulip.unknown") for a
	//     person, whose resume runs the call again (same key) or says what
	//     happened (a result).
	// The trace line's Unknown says what happened (docs/unknown.md).
	// Changing OnUnknown (or, with it set, RetryPolicy.MaximumAttempts) is
	// a workflow change for runs in flight, as Local is.
	OnUnknown string `json:"on_unknown,omitempty"`
}

// ToolOptions are a tool's activity options. Zero values are documented
// per field.
type ToolOptions struct {
	// StartToCloseTimeout bounds one attempt. Zero value: 1 minute.
	StartToCloseTimeout time.Duration
	// RetryPolicy is Temporal's retry policy for the body; its attempts are
	// one execution. Zero value (nil): up to 3 attempts, 1 s initial
	// backoff.
	RetryPolicy *temporal.RetryPolicy
	// HeartbeatTimeout is how long an attempt may go without a heartbeat
	// before Temporal retries it (on another worker, when this one died).
	// tulip heartbeats while the body runs, so bodies need not. Zero value:
	// 5 s. Negative: none (a dead worker's attempt then waits out
	// StartToCloseTimeout).
	HeartbeatTimeout time.Duration
	// Check answers, for a tool whose OnUnknown is "check", whether the
	// service applied the execution in.IdempotencyKey: applied, with the
	// result the body would have returned (JSON), or not. It runs as an
	// activity of its own (up to 3 attempts); if it still fails, the call
	// fails with kind OutcomeUnknown. Required with "check", refused
	// without it.
	Check func(ctx context.Context, in ToolInput) (result json.RawMessage, applied bool, err error)
}

// ToolInput is what a toolset's Call receives (and CallInfo returns): the
// call, its argument text and its downstream idempotency key.
type ToolInput struct {
	// Tool is the tool's name; CallID the model's tool-call id.
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	// Arguments is the argument text, after the hooks.
	Arguments string `json:"arguments"`
	// IdempotencyKey is the stable downstream key of this execution.
	IdempotencyKey string `json:"idempotency_key"`
	// Agent and Thread are the run's ("" for none).
	Agent  string `json:"agent"`
	Thread string `json:"thread,omitempty"`
	// Toolset names the Toolset whose tool this is ("" for a Go tool).
	Toolset string `json:"toolset,omitempty"`
}

// ToolOutput is a toolset call's result.
type ToolOutput struct {
	// Result is the result as JSON.
	Result json.RawMessage `json:"result"`
}

// NewTool declares a Go tool whose body takes typed arguments. The
// argument text is decoded into Args with encoding/json (a failure is the
// call's outcome, non-retryable, kind ArgumentDecode) and the body's result
// is encoded as JSON. The body reads its downstream key with
// IdempotencyKey and sends it to the service it calls.
func NewTool[Args, Result any](spec ToolSpec, body func(ctx context.Context, args Args) (Result, error), opts ...ToolOptions) (*Tool, error) {
	t, err := activities.NewTool(protocol.ToolSpec(spec), body, internalToolOptions(opts)...)
	if err != nil {
		return nil, &declarationError{err}
	}
	return &Tool{t}, nil
}

// declarationError is a tool declaration NewTool or AgentTool refuses:
// kind BadInput, its message the reason.
type declarationError struct{ err error }

func (e *declarationError) Error() string { return e.err.Error() }
func (e *declarationError) Unwrap() error { return e.err }

// Kind is BadInput.
func (e *declarationError) Kind() ErrorKind { return BadInput }

// MustTool is NewTool that panics on a declaration error, for
// package-level tool variables.
func MustTool[Args, Result any](spec ToolSpec, body func(ctx context.Context, args Args) (Result, error), opts ...ToolOptions) *Tool {
	return &Tool{activities.MustTool(protocol.ToolSpec(spec), body, internalToolOptions(opts)...)}
}

// IdempotencyKey returns the downstream idempotency key of the tool call
// running in ctx: stable across retries, replays and a served call's
// original execution; send it to the service (as an Idempotency-Key
// header, say) so that the service deduplicates too. "" outside a tool
// call.
func IdempotencyKey(ctx context.Context) string { return activities.IdempotencyKey(ctx) }

// SetIdempotencyKeyHeader sets the Idempotency-Key header of req to the
// key of the tool call running in ctx. It fails outside a tool call.
func SetIdempotencyKeyHeader(ctx context.Context, req *http.Request) error {
	return activities.SetIdempotencyKeyHeader(ctx, req)
}

// ToolError is a tool failure of a stable kind: it is the call's recorded
// outcome (an idempotent tool's identical later call is served the same
// error), and its type in the run's history. kind is yours
// ("billing.Declined") or one of tulip's (Ambiguous). nonRetryable stops
// Temporal's retries of the body.
func ToolError(message string, kind ErrorKind, nonRetryable bool) error {
	return activities.ToolError(message, string(kind), nonRetryable)
}

// CallInfo returns the tool call running in ctx (its id, tool, argument
// text, downstream key, agent and thread), for a Go tool's body; false
// outside a tool call.
func CallInfo(ctx context.Context) (ToolInput, bool) {
	in, ok := activities.CallInfo(ctx)
	return ToolInput(in), ok
}

func internalToolOptions(opts []ToolOptions) []activities.ToolOptions {
	out := make([]activities.ToolOptions, len(opts))
	for i, o := range opts {
		out[i] = activities.ToolOptions{StartToCloseTimeout: o.StartToCloseTimeout, RetryPolicy: o.RetryPolicy, HeartbeatTimeout: o.HeartbeatTimeout}
		if check := o.Check; check != nil {
			out[i].Check = func(ctx context.Context, in activities.ToolInput) (json.RawMessage, bool, error) {
				return check(ctx, ToolInput(in))
			}
		}
	}
	return out
}

// toolset adapts a Toolset to the runtime's.
type toolset struct{ ts Toolset }

func (a toolset) Name() string { return a.ts.Name() }

func (a toolset) Tools(ctx context.Context) ([]protocol.ToolSpec, error) {
	specs, err := a.ts.Tools(ctx)
	return internalSpecs(specs), err
}

func (a toolset) Call(ctx context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
	out, err := a.ts.Call(ctx, ToolInput(in))
	return activities.ToolOutput{Result: out.Result}, err
}

// checker is a Toolset with the optional Check method (see Toolset).
type checker interface {
	Toolset
	Check(ctx context.Context, in ToolInput) (result json.RawMessage, applied bool, err error)
}

// checkingToolset adapts a Toolset that has a Check method.
type checkingToolset struct{ toolset }

func (a checkingToolset) Check(ctx context.Context, in activities.ToolInput) (json.RawMessage, bool, error) {
	return a.ts.(checker).Check(ctx, ToolInput(in))
}

// publicCheckingToolset adapts the runtime's toolset that checks.
type publicCheckingToolset struct{ publicToolset }

func (a publicCheckingToolset) Check(ctx context.Context, in ToolInput) (json.RawMessage, bool, error) {
	return a.ts.(activities.ToolsetChecker).Check(ctx, activities.ToolInput(in))
}

// publicToolset adapts the runtime's toolset (a Go tool of the module's
// own, say) to a Toolset.
type publicToolset struct{ ts activities.Toolset }

func (a publicToolset) Name() string { return a.ts.Name() }

func (a publicToolset) Tools(ctx context.Context) ([]ToolSpec, error) {
	specs, err := a.ts.Tools(ctx)
	return publicSpecs(specs), err
}

func (a publicToolset) Call(ctx context.Context, in ToolInput) (ToolOutput, error) {
	out, err := a.ts.Call(ctx, activities.ToolInput(in))
	return ToolOutput{Result: out.Result}, err
}

func internalSpecs(specs []ToolSpec) []protocol.ToolSpec {
	if specs == nil {
		return nil
	}
	out := make([]protocol.ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = protocol.ToolSpec(s)
	}
	return out
}

func publicSpecs(specs []protocol.ToolSpec) []ToolSpec {
	if specs == nil {
		return nil
	}
	out := make([]ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = ToolSpec(s)
	}
	return out
}

func init() {
	// The CLI and the module's tests build workers from internal options:
	// they take a Toolset (an MCP server's) through PublicToolset, and
	// give the runtime's own tools to the public API through
	// InternalToolset.
	activities.PublicToolset = func(ts any) activities.Toolset {
		switch t := ts.(type) {
		case *Tool:
			return t.t
		case activities.Toolset:
			return t
		case checker:
			return checkingToolset{toolset{t}}
		}
		return toolset{ts.(Toolset)}
	}
	activities.InternalToolset = func(ts activities.Toolset) any {
		if t, ok := ts.(*activities.Tool); ok {
			return &Tool{t}
		}
		if _, ok := ts.(activities.ToolsetChecker); ok {
			return publicCheckingToolset{publicToolset{ts}}
		}
		return publicToolset{ts}
	}
}

// AgentToolOptions say what a sub-agent tool runs (AgentTool). Each zero
// value is documented.
type AgentToolOptions struct {
	// Agent names the sub-agent (its execution log on its thread). Zero
	// value: the tool's name.
	Agent string
	// Model names a model registered on the sub-agent's workers. Zero
	// value: the calling run's model.
	Model string
	// TaskQueue runs the sub-agent on the workers of another task queue
	// (they need tulip's plugin, and the sub-agent's tools and model).
	// Zero value: the calling run's task queue.
	TaskQueue string
	// Instructions are given to the sub-agent's model with every request.
	Instructions string
	// Hooks are installed in the sub-agent's run at its start, by name.
	Hooks []string
	// Tools names the tools (and toolsets) of its workers the sub-agent
	// is offered, as agent.Options.Tools does for a run. Zero value:
	// every tool of its workers but itself (a sub-agent is never offered
	// itself).
	Tools []string
	// MaxTurns bounds the sub-agent's model responses per call. Zero
	// value: 32.
	MaxTurns int
}

// AgentTool declares a tool whose body is another agent run
// (docs/subagents.md): the model calls it with a task ({"task": text}),
// and the calling run starts the sub-agent as a child workflow on its
// own thread, the caller's thread + "/sub/" + spec.Name, with its own
// execution log and downstream keys. The call's result is the
// sub-agent's answer ({"answer", "thread", "turns"}). With
// spec.Idempotent, an identical task later is served from the caller's
// log and no child starts. The sub-agent's interrupts are the caller's:
// Interrupt.Agent names its path, and the caller's resume answers it.
// spec's Parameters, Local, OnUnknown and KeyTemplate must be unset.
func AgentTool(spec ToolSpec, opts AgentToolOptions) (*Tool, error) {
	t, err := activities.NewAgentTool(protocol.ToolSpec(spec), activities.SubAgent{Agent: opts.Agent, Model: opts.Model,
		TaskQueue: opts.TaskQueue, Instructions: opts.Instructions, Hooks: opts.Hooks, Tools: slices.Clone(opts.Tools), MaxTurns: opts.MaxTurns})
	if err != nil {
		return nil, &declarationError{err}
	}
	return &Tool{t}, nil
}
