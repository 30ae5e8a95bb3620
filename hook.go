package tulip

import (
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/hooks"
)

// Hook is a before-tool-call hook, registered by name in Options.Hooks and
// installed by a run (agent.Options.Hooks) or mid-run. It sees each tool
// call before the log matches it and may rewrite its arguments (the log
// compares the rewritten ones), cancel it with a message, or interrupt the
// run for a person's approval. Hooks run in workflow code: they must be
// deterministic (no I/O, clock, randomness or map order).
type Hook = hooks.Hook

// Call is the tool call a hook sees: its id, tool, agent, thread, turn and
// arguments (Arg, Args, SetArg).
type Call = hooks.Call

// Verdict is a hook's decision about a call. The zero value lets the call
// proceed; Cancel cancels it with a message; Interrupt holds it (and the
// rest of its response) for approval.
type Verdict = hooks.Decision

// Value is a JSON value under the contract's value model (docs/rules.md):
// numbers keep their spelling's kind (120 is Int, 120.0 is Float), and an
// object's members keep their order. Hooks read and rewrite arguments as
// Values.
type Value = dedup.Value

// ValueKind is a Value's JSON type.
type ValueKind = dedup.Kind

// The JSON kinds. Numbers are Int (spelled without '.', 'e' or 'E') or
// Float.
const (
	Null   = dedup.Null
	Bool   = dedup.Bool
	Int    = dedup.Int
	Float  = dedup.Float
	String = dedup.String
	Array  = dedup.Array
	Object = dedup.Object
)

// StringValue is a JSON string.
func StringValue(s string) Value { return dedup.StringValue(s) }

// ParseValue parses a JSON value's text (numbers keep their kind).
func ParseValue(text string) (Value, error) { return dedup.ParseValue(text, dedup.Limits{}) }

// Block returns a hook that cancels every call of tool with message.
func Block(tool, message string) Hook { return hooks.Block(tool, message) }

// Approve returns a hook that interrupts the run before every call of
// tool, for a person's approval.
func Approve(tool, reason string) Hook { return hooks.Approve(tool, reason) }

// NewCall makes the call a hook sees, to unit-test a hook without a
// worker: the hook reads and rewrites args through it (args itself is
// never changed).
func NewCall(id, tool string, args Value) *Call { return hooks.NewCall(id, tool, &args) }
