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
type Hook func(c *Call) Verdict

// Call is the tool call a hook sees. Read and rewrite its arguments with
// Arg, Args and SetArg; make one for a hook's unit test with NewCall.
type Call struct {
	// ID is the model's tool-call id, and Tool the tool's name.
	ID   string
	Tool string
	// Agent and Thread are the run's ("" for the default agent, or a run
	// on no thread).
	Agent  string
	Thread string
	// Turn is the model response (1-based, in its run) the call came from.
	Turn int

	c *hooks.Call
}

// Arg returns the top-level argument named key, or nil.
func (c *Call) Arg(key string) *Value { return (*Value)(c.c.Arg(key)) }

// Args returns the argument object, as rewritten so far.
func (c *Call) Args() *Value { return (*Value)(c.c.Args()) }

// SetArg rewrites the top-level argument named key: the log compares the
// rewritten arguments, and the tool receives them.
func (c *Call) SetArg(key string, v Value) { c.c.SetArg(key, dedup.Value(v)) }

// Changed reports whether a hook rewrote the arguments.
func (c *Call) Changed() bool { return c.c.Changed() }

// Verdict is a hook's decision about a call. The zero value lets the call
// proceed.
type Verdict struct {
	// Cancel, when non-empty, cancels the call with this message: it is
	// recorded with the model's arguments and the message as its outcome.
	Cancel string
	// Interrupt, when non-empty, pauses the run before this call for a
	// person's approval; the call and the rest of its response are held.
	Interrupt string
}

// Value is a JSON value under the contract's value model (docs/rules.md):
// numbers keep their spelling's kind (120 is Int, 120.0 is Float), and an
// object's members keep their order. Hooks read and rewrite arguments as
// Values.
type Value dedup.Value

func (v *Value) in() *dedup.Value { return (*dedup.Value)(v) }

// Kind is the value's JSON type.
func (v *Value) Kind() ValueKind { return v.in().Kind() }

// Bool is a Bool's value.
func (v *Value) Bool() bool { return v.in().Bool() }

// Str is a String's value (unescaped).
func (v *Value) Str() string { return v.in().Str() }

// Literal is a number's spelling as written in the argument text.
func (v *Value) Literal() string { return v.in().Literal() }

// Float64 is a Float's value, or an Int's nearest float64.
func (v *Value) Float64() float64 { return v.in().Float64() }

// NumberKey is a number's text in its value key: the digits of an integral
// value however written (120 and 120.0 are "120"), else the shortest text
// of its float64 ("0.5").
func (v *Value) NumberKey() string { return v.in().NumberKey() }

// JSON is a compact JSON encoding that keeps every number's spelling and
// the members' order: it parses back to an identical Value.
func (v *Value) JSON() string { return v.in().JSON() }

// Get returns the member named key of an Object, or nil.
func (v *Value) Get(key string) *Value { return (*Value)(v.in().Get(key)) }

// Set replaces (or appends) the member named key of an Object.
func (v *Value) Set(key string, val Value) { v.in().Set(key, dedup.Value(val)) }

// Clone returns a deep copy.
func (v Value) Clone() Value { return Value(dedup.Value(v).Clone()) }

// Elems are an Array's elements (a copy of the list).
func (v *Value) Elems() []Value {
	in := v.in().Elems()
	out := make([]Value, len(in))
	for i, e := range in {
		out[i] = Value(e)
	}
	return out
}

// Members are an Object's members, in order (a copy of the list).
func (v *Value) Members() []Member {
	in := v.in().Members()
	out := make([]Member, len(in))
	for i, m := range in {
		out[i] = Member{Key: m.Key, Value: Value(m.Value)}
	}
	return out
}

// Member is one member of an Object.
type Member struct {
	Key   string
	Value Value
}

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
func StringValue(s string) Value { return Value(dedup.StringValue(s)) }

// ParseValue parses a JSON value's text (numbers keep their kind).
func ParseValue(text string) (Value, error) {
	v, err := dedup.ParseValue(text, dedup.Limits{})
	return Value(v), err
}

// Block returns a hook that cancels every call of tool with message.
func Block(tool, message string) Hook { return publicHook(hooks.Block(tool, message)) }

// Approve returns a hook that interrupts the run before every call of
// tool, for a person's approval.
func Approve(tool, reason string) Hook { return publicHook(hooks.Approve(tool, reason)) }

// NewCall makes the call a hook sees, to unit-test a hook without a
// worker: the hook reads and rewrites args through it (args itself is
// never changed).
func NewCall(id, tool string, args Value) *Call {
	return &Call{ID: id, Tool: tool, c: hooks.NewCall(id, tool, (*dedup.Value)(&args))}
}

// internalHook adapts a Hook to the runtime's (in workflow code, per call).
func internalHook(h Hook) hooks.Hook {
	return func(c *hooks.Call) hooks.Decision {
		return hooks.Decision(h(&Call{ID: c.ID, Tool: c.Tool, Agent: c.Agent, Thread: c.Thread, Turn: c.Turn, c: c}))
	}
}

// publicHook is the runtime's hook as a Hook.
func publicHook(h hooks.Hook) Hook {
	return func(c *Call) Verdict { return Verdict(h(c.c)) }
}

func internalHooks(in map[string]Hook) map[string]hooks.Hook {
	if in == nil {
		return nil
	}
	out := make(map[string]hooks.Hook, len(in))
	for name, h := range in {
		out[name] = internalHook(h)
	}
	return out
}

func init() {
	// The CLI and the module's tests mix the runtime's hooks (the demo's)
	// with public ones.
	hooks.Public = func(h any) hooks.Hook { return internalHook(h.(Hook)) }
	hooks.Internal = func(h hooks.Hook) any { return publicHook(h) }
}
