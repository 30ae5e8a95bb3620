package mcp

import (
	"fmt"
	"strings"

	"github.com/tulip-temporal/tulip"
)

// Stable kinds (temporal.ApplicationError types) of a failed Call, as
// recorded in a run's history.
const (
	// ErrToolError: the server ran the tool and it reported failure
	// (isError). Non-retryable; the message is the result's text.
	ErrToolError tulip.ErrorKind = "mcp.ToolError"
	// ErrProtocolError: the server answered the call with a JSON-RPC error
	// (an unknown tool, invalid arguments, ...). Non-retryable; the message
	// holds the JSON-RPC code.
	ErrProtocolError tulip.ErrorKind = "mcp.ProtocolError"
	// ErrTransport: the server could not be reached, the connection broke
	// before the request was sent, or an HTTP server turned the request
	// away unhandled (404 for a session it forgot, 429, 503). Retryable:
	// Temporal attempts the call again (with the same downstream key), on
	// a new connection. A connection that breaks after the request was
	// sent is tulip.Ambiguous instead: the call may have run.
	ErrTransport tulip.ErrorKind = "mcp.TransportError"
	// ErrCheckAnswer: a check tool (Server.Checks) answered in another
	// form than {"applied": true|false, "result": ...}. Non-retryable.
	ErrCheckAnswer tulip.ErrorKind = "mcp.CheckAnswer"
	// ErrUnknownTool: the call names a tool this toolset cannot route (a
	// prefixed toolset's tool without its prefix). Non-retryable.
	ErrUnknownTool tulip.ErrorKind = "mcp.UnknownTool"
)

// ConfigError is a Server configuration that Validate refuses.
type ConfigError struct {
	Server, Field, Reason string
}

func (e *ConfigError) Error() string {
	if e.Server == "" {
		return fmt.Sprintf("mcp: server %s %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("mcp: server %q: %s %s", e.Server, e.Field, e.Reason)
}

// ToolNameError is a listed tool whose name tulip cannot use: a tool name
// is 1-64 of [A-Za-z0-9_-], prefix included.
type ToolNameError struct {
	Server string
	// Tool is the MCP name; Name the tulip name it would have.
	Tool, Name string
}

func (e *ToolNameError) Error() string {
	if e.Tool != e.Name {
		return fmt.Sprintf("mcp: server %q lists tool %q, whose name %q is not a valid tulip tool name (1-64 letters, digits, '_' or '-')", e.Server, e.Tool, e.Name)
	}
	return fmt.Sprintf("mcp: server %q lists tool %q, which is not a valid tulip tool name (1-64 letters, digits, '_' or '-')", e.Server, e.Tool)
}

// ClashError is a tool name offered twice: by two servers, or by a server
// and a Go tool (First is then "").
type ClashError struct {
	Tool          string
	First, Second string
}

func (e *ClashError) Error() string {
	if e.First == "" {
		return fmt.Sprintf("mcp: tool %q is offered by a Go tool and by server %q: give server %q a prefix", e.Tool, e.Second, e.Second)
	}
	return fmt.Sprintf("mcp: tool %q is offered by servers %q and %q: give one of them a prefix", e.Tool, e.First, e.Second)
}

// DuplicateServerError is two servers with one name.
type DuplicateServerError struct{ Server string }

func (e *DuplicateServerError) Error() string {
	return fmt.Sprintf("mcp: two servers are named %q", e.Server)
}

// OverrideError is an Idempotent or NotIdempotent entry that names a tool
// the server does not list (checked by Open, to catch typos).
type OverrideError struct {
	Server, List, Tool string
}

func (e *OverrideError) Error() string {
	return fmt.Sprintf("mcp: server %q: %s names tool %q, which the server does not list", e.Server, e.List, e.Tool)
}

// ConnectError is a server that could not be reached or listed.
type ConnectError struct {
	Server string
	// Reason is the cause, on one line, secrets redacted.
	Reason string
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("mcp: server %q: %s", e.Server, e.Reason)
}

// ClosedError is the error of a Toolset used after Close.
type ClosedError struct{ Server string }

func (e *ClosedError) Error() string {
	return fmt.Sprintf("mcp: server %q: the toolset is closed", e.Server)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	return strings.ReplaceAll(s, "\n", " ")
}
