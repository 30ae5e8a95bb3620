// Package mcp makes the tools of MCP (Model Context Protocol) servers tulip
// tools: each server is a tulip.Toolset, for tulip.Options.Tools.
//
// A Toolset lists its server's tools (every page) and decides, for each, what
// tulip does with it: Idempotent (an identical later call in a run is served
// from the execution log) and Approval (every call waits for a person). The
// decision reads the tool's MCP annotations (readOnlyHint, destructiveHint,
// idempotentHint, openWorldHint; MCP spec 2025-11-25) only as far as the
// server is trusted:
//
//   - Served on repeat: a tool of a trusted server (Server.Trust) whose
//     annotations say idempotentHint and not readOnlyHint, or a tool named
//     in Server.Idempotent. Server.NotIdempotent always wins. A read-only
//     tool runs every time (serving a read from the log would show the
//     model what it read before a write); list it in Idempotent to have it
//     served anyway.
//   - Asks approval (only with Server.ApproveDestructive): a tool of a
//     trusted server whose annotations say destructiveHint, or say neither
//     readOnlyHint nor destructiveHint (the spec's default is destructive);
//     and every tool of an untrusted server, whose hints may ask for
//     approval but never waive it.
//   - Holds if lost: a call of an untrusted server's tool that is not
//     served on repeat, whose worker was lost mid-call, waits for a person
//     (tulip.ToolSpec.OnUnknown "hold") rather than run again; set
//     Server.OnUnknown to choose.
//   - Checks if lost: a tool named in Server.Checks; the check tool it
//     names is asked, by key, whether the lost call was applied (see
//     Toolset.Check for the convention it follows).
//
// A call whose connection breaks after its request was sent may have run:
// its error is of kind tulip.Ambiguous, an unknown outcome. One whose
// request never went out, or that an HTTP server turned away unhandled
// (404 for a forgotten session, 429, 503), is ErrTransport.
//
// A call sends tulip's downstream idempotency key in the request's _meta
// under MetaIdempotencyKey ("io.tulip/idempotency-key"), and the model's
// call id under MetaCallID. A server that honours the key closes the window
// between a side effect and its record in history: a retried or re-driven
// call carries the same key.
//
// Connections: one client session per server per process, made on first use,
// shared by concurrent calls and made again after it breaks. A stdio server
// (Server.Command) is a child process of the worker: spawned on connect,
// spawned again when it dies, and stopped by Close. It does not inherit the
// worker's environment: only a minimal default (PATH, HOME, ...; see
// Server.Env) and Server.Env.
//
// Secrets: Server.Env values, Server.Headers values and the userinfo and
// query values of Server.URL never enter a ToolSpec, an error or a result
// this package returns (they are replaced by "[redacted]" wherever the
// server echoes them, and the URL, wherever an error spells it out, by its
// RedactURL form), so they never reach a run's history; the package logs
// nothing.
//
// Open connects to several servers at once and refuses tool names that
// clash between them (or with Go tools) unless a prefix separates them.
package mcp
