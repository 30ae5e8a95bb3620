package tulip

import (
	"context"
	"net/http"

	"github.com/tulip-temporal/tulip/internal/activities"
)

// Toolset is a set of tools: a Go tool made with NewTool (a set of one), an
// MCP server (module github.com/tulip-temporal/tulip/mcp), or your
// own. Options.Tools takes any mix; a tool name must be unique across all
// of them (NewPlugin refuses a clash, and a run refuses one it lists).
//
// A run reads its toolsets' lists once, in an activity, before its first
// model call, so the list a run uses is in its history: a replay and every
// other worker see the same tools whatever a toolset lists later.
type Toolset = activities.Toolset

// Tool is a Go function tool: its spec, its activity options and its body.
// It is a Toolset of one tool. Make one with NewTool or MustTool.
type Tool = activities.Tool

// ToolSpec describes a tool to the model and to the execution log: its
// name, description, argument schema, and whether it is Idempotent (an
// identical later call is served from the log), needs Approval, or runs as
// a Local activity.
type ToolSpec = activities.ToolSpec

// ToolOptions are a tool's activity options (timeouts, retry policy,
// heartbeat). Zero values are documented per field.
type ToolOptions = activities.ToolOptions

// ToolInput is what a toolset's Call receives: the tool, its argument
// text and its downstream idempotency key.
type ToolInput = activities.ToolInput

// ToolOutput is a toolset call's result: JSON text.
type ToolOutput = activities.ToolOutput

// NewTool declares a Go tool whose body takes typed arguments. The
// argument text is decoded into Args with encoding/json (a failure is the
// call's outcome, non-retryable, kind ArgumentDecode) and the body's result
// is encoded as JSON. The body reads its downstream key with
// IdempotencyKey and sends it to the service it calls.
func NewTool[Args, Result any](spec ToolSpec, body func(ctx context.Context, args Args) (Result, error), opts ...ToolOptions) (*Tool, error) {
	return activities.NewTool(spec, body, opts...)
}

// MustTool is NewTool that panics on a declaration error, for
// package-level tool variables.
func MustTool[Args, Result any](spec ToolSpec, body func(ctx context.Context, args Args) (Result, error), opts ...ToolOptions) *Tool {
	return activities.MustTool(spec, body, opts...)
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

// ToolError is a tool failure with a stable type: it is the call's
// recorded outcome (an idempotent tool's identical later call is served
// the same error). nonRetryable stops Temporal's retries of the body.
func ToolError(message, errType string, nonRetryable bool) error {
	return activities.ToolError(message, errType, nonRetryable)
}

// CallInfo returns the tool call running in ctx (its id, tool, argument
// text, downstream key, agent and thread), for a Go tool's body; false
// outside a tool call.
func CallInfo(ctx context.Context) (ToolInput, bool) { return activities.CallInfo(ctx) }
