// Package hooks defines before-tool-call hooks: deterministic functions,
// registered by name on the worker, that see each tool call before dedup and
// may rewrite its arguments, cancel it with a message, or interrupt the run
// for human approval.
//
// Hooks run inside workflow code, so they must be deterministic: no I/O, no
// clock, no randomness, no map iteration that affects the outcome.
package hooks

import "github.com/tulip-temporal/tulip/internal/dedup"

// Call is the tool call a hook sees.
type Call struct {
	ID     string
	Tool   string
	Agent  string
	Thread string
	Turn   int

	args    dedup.Value
	changed bool
}

// NewCall makes a Call over a copy of args; the original is never changed.
func NewCall(id, tool string, args *dedup.Value) *Call {
	return &Call{ID: id, Tool: tool, args: args.Clone()}
}

// Arg returns the top-level argument named key, or nil.
func (c *Call) Arg(key string) *dedup.Value { return c.args.Get(key) }

// Args returns the current (possibly rewritten) argument object.
func (c *Call) Args() *dedup.Value { return &c.args }

// SetArg rewrites the top-level argument named key. Dedup compares the
// rewritten arguments.
func (c *Call) SetArg(key string, v dedup.Value) {
	c.args.Set(key, v)
	c.changed = true
}

// Changed reports whether a hook rewrote the arguments.
func (c *Call) Changed() bool { return c.changed }

// Decision is a hook's verdict. The zero value lets the call proceed.
type Decision struct {
	// Cancel, when non-empty, cancels the call with this message: it is
	// recorded with the model's arguments and the message as its outcome.
	Cancel string
	// Interrupt, when non-empty, pauses the run before this call for human
	// approval; the call and the rest of its response are held.
	Interrupt string
}

// Hook is a before-tool-call hook.
type Hook func(c *Call) Decision

// Block returns a hook that cancels every call of tool with message.
func Block(tool, message string) Hook {
	return func(c *Call) Decision {
		if c.Tool == tool {
			return Decision{Cancel: message}
		}
		return Decision{}
	}
}

// Approve returns a hook that interrupts the run before every call of tool.
func Approve(tool, reason string) Hook {
	return func(c *Call) Decision {
		if c.Tool == tool {
			return Decision{Interrupt: reason}
		}
		return Decision{}
	}
}

// Public adapts a hook of package tulip's Hook type for this package, and
// Internal does the reverse (its result is a tulip.Hook). Package tulip
// sets both when it is initialized: it imports this package, which so
// cannot import it. The CLI and the module's tests use them.
var (
	Public   func(h any) Hook
	Internal func(h Hook) any
)
