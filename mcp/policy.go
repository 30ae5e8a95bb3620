package mcp

import (
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Behaviour is what tulip does with a tool, and why.
type Behaviour struct {
	// Idempotent: an identical later call in a run is served from the log.
	Idempotent bool `json:"idempotent"`
	// Approval: every call waits for a person's approval.
	Approval bool `json:"approval"`
	// OnUnknown is the tool's tulip.ToolSpec.OnUnknown: "hold" (a call
	// whose worker was lost waits for a person), "check" (the server's
	// Check tool is asked) or "" (Temporal retries it).
	OnUnknown string `json:"on_unknown,omitempty"`
	// Check names (by MCP name) the tool that checks a lost call, with
	// OnUnknown "check" (Server.Checks).
	Check string `json:"check,omitempty"`
	// Why explains Idempotent, then Approval, in a few words.
	Why string `json:"why"`
}

// String is the behaviour in the words of 'tulip mcp tools': "served on
// repeat" or "runs every time", and "asks approval" when it does.
func (b Behaviour) String() string {
	s := "runs every time"
	if b.Idempotent {
		s = "served on repeat"
	}
	if b.Approval {
		s = "asks approval; " + s
	}
	switch b.OnUnknown {
	case "hold":
		s += "; holds if lost"
	case "check":
		s += "; if lost, asks " + b.Check
	}
	return s
}

// Decide is the rule that maps a tool's annotations (nil: none) to what
// tulip does with it, for the server s. mcpName is the tool's MCP name.
func (s Server) Decide(mcpName string, a *sdk.ToolAnnotations) Behaviour {
	var b Behaviour
	ro := a != nil && a.ReadOnlyHint
	switch {
	case slices.Contains(s.NotIdempotent, mcpName):
		b.Why = "NotIdempotent override"
	case slices.Contains(s.Idempotent, mcpName):
		b.Idempotent, b.Why = true, "Idempotent override"
	case !s.Trust:
		b.Why = "untrusted server: hints ignored"
	case a != nil && a.IdempotentHint && !ro:
		b.Idempotent, b.Why = true, "trusted idempotentHint"
	case ro:
		// The spec: idempotentHint is meaningful only when readOnlyHint is
		// false. A read served from the log would be stale after a write.
		b.Why = "trusted readOnlyHint: reads run every time"
	default:
		b.Why = "trusted, no idempotentHint"
	}
	switch {
	case s.Checks[mcpName] != "":
		b.OnUnknown, b.Check = "check", s.Checks[mcpName]
	case s.OnUnknown != "":
		b.OnUnknown = s.OnUnknown
	case !s.Trust && !b.Idempotent:
		// Nothing says its effect is safe to repeat: a call whose worker
		// was lost waits for a person rather than run again.
		b.OnUnknown = "hold"
	}
	if b.OnUnknown == "retry" {
		b.OnUnknown = ""
	}
	if !s.ApproveDestructive {
		return b
	}
	switch {
	case !s.Trust:
		// Hints may ask for approval, never waive it: with no trust every
		// tool is taken as destructive, whatever its hints say.
		b.Approval, b.Why = true, b.Why+"; untrusted: approval for every tool"
	case destructive(a):
		b.Approval, b.Why = true, b.Why+"; destructive"
	default:
		b.Why += "; not destructive"
	}
	return b
}

// destructive: destructiveHint is true, or the tool is not read-only and
// says nothing about destructiveHint (the spec's default is true).
func destructive(a *sdk.ToolAnnotations) bool {
	if a == nil {
		return true
	}
	if a.DestructiveHint != nil {
		return *a.DestructiveHint
	}
	return !a.ReadOnlyHint
}
