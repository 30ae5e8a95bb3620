package protocol

import "encoding/json"

// ToolSpec describes a tool to the model and to the dedup runtime.
type ToolSpec struct {
	// Name is the tool's name, as the model calls it. Required.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments object. NewTool
	// infers it from the body's argument type when it is empty, and checks
	// it against that type when it is given (see NewTool). Zero value in a
	// spec that reaches the model (ToolFromSpec): any object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Idempotent: an identical later call in the run is served from the
	// execution log and the body does not run again.
	Idempotent bool `json:"idempotent,omitempty"`
	// KeyTemplate, when set, makes the downstream idempotency key from the
	// arguments instead of the default derivation: "{name}" is replaced by
	// the top-level argument name (strings as is, numbers by exact value,
	// so 120 and 120.0 give the same key). Example: "refund:{order_id}:v1".
	KeyTemplate string `json:"key_template,omitempty"`
	// Approval: every call of the tool waits for a person's approval (the
	// run is interrupted before it, as by a hook, and resumed by
	// tulip.resume) before it runs. Toolsets set it for destructive tools.
	Approval bool `json:"approval,omitempty"`
	// Toolset names the Toolset the tool comes from ("" for a Go tool).
	Toolset string `json:"toolset,omitempty"`
	// Local runs the tool as a local activity (the fast path, for quick
	// work, reads and side-effect-free lookups): the worker that runs the
	// workflow task runs the body itself, no activity task is dispatched,
	// and its outcome is one marker event. Matching, the log, downstream
	// keys and trace lines are the same. A local call is retried by its
	// RetryPolicy within StartToCloseTimeout; a worker that dies while it
	// runs makes the workflow task time out, and the next worker runs the
	// body again (at least once, like any activity; with no heartbeat). Do
	// not make a tool Local whose body takes longer than a few seconds, and
	// changing Local is a workflow change for runs in flight (their
	// replay expects the other event). Zero: a normal activity.
	Local bool `json:"local,omitempty"`
	// OnUnknown is what the run does when an attempt started and its
	// outcome is unknown: the worker running it was lost (its heartbeat or
	// start-to-close timeout passed) or the body returned an error of type
	// ErrAmbiguous. A clean error from the body is never unknown. "" or
	// OnUnknownRetry: Temporal retries the attempt with the same key (for
	// services that honour it). OnUnknownCheck: ToolOptions.Check asks the
	// service whether the key was applied; its answer is the call's
	// outcome, and the call runs again (same key) only on "not applied".
	// OnUnknownHold: the run is interrupted for a person, who has it run
	// again (same key) or says what happened.
	OnUnknown string `json:"on_unknown,omitempty"`
}

// The values of ToolSpec.OnUnknown.
const (
	OnUnknownRetry = "retry"
	OnUnknownCheck = "check"
	OnUnknownHold  = "hold"
)

// ModelParams are a run's sampling parameters: each, when set, is sent to
// the model in place of the model's own setting.
type ModelParams struct {
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	MaxOutputTokens *int     `json:"max_output_tokens,omitempty"`
}
