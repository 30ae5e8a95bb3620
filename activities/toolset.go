package activities

import "context"

// Toolset is a set of tools a worker discovers at run time rather than
// declares in Go: the tools an MCP server lists, say (the module
// github.com/tulip-temporal/tulip/mcp makes one per server).
//
// A run reads the lists of the worker's toolsets once, in an activity
// (ListToolsActivity), before its first model call: the list it uses is in
// its history, so a replay and every other worker see the same tools, with
// the same Idempotent and Approval flags, whatever the toolset lists later.
// Each call of a toolset's tool is a Temporal activity named like a Go
// tool's (ToolActivityName), handled by the worker's toolset dispatcher.
type Toolset interface {
	// Name names the toolset; unique among a worker's toolsets.
	Name() string
	// Tools lists the toolset's tools as tulip will use them: Name,
	// Description and Parameters as the model is shown them, and
	// Idempotent and Approval already decided (for an MCP server: by
	// trust, annotations and overrides). A name must not clash with
	// another toolset's tool or a Go tool. Implementations may cache the
	// list.
	Tools(ctx context.Context) ([]ToolSpec, error)
	// Call runs the tool in.Tool with in.Arguments (a JSON object's text)
	// and returns its result as JSON. in.IdempotencyKey is the downstream
	// key: send it to the service. A tool failure is an error (ToolError
	// for a typed one); it is the call's recorded outcome like a Go tool's.
	Call(ctx context.Context, in ToolInput) (ToolOutput, error)
}
