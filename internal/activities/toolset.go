package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tulip-temporal/tulip/internal/protocol"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

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
	Tools(ctx context.Context) ([]protocol.ToolSpec, error)
	// Call runs the tool in.Tool with in.Arguments (a JSON object's text)
	// and returns its result as JSON. in.IdempotencyKey is the downstream
	// key: send it to the service. A tool failure is an error (ToolError
	// for a typed one); it is the call's recorded outcome like a Go tool's.
	Call(ctx context.Context, in ToolInput) (ToolOutput, error)
}

// ToolsetChecker is a Toolset that answers, for its tools whose OnUnknown
// is "check", whether the service applied an execution (in.IdempotencyKey):
// applied, with the result the call would have returned (JSON), or not.
// Only such a toolset may list a tool with OnUnknown "check".
type ToolsetChecker interface {
	Check(ctx context.Context, in ToolInput) (result json.RawMessage, applied bool, err error)
}

// ErrToolClash: two toolsets (or a toolset and a Go tool) offer a tool of
// the same name. Non-retryable.
const ErrToolClash = "tulip.ToolClash"

// Toolsets are a worker's toolsets as activities: the list a run reads
// once (List, ListToolsActivity), and every call of their tools (Call, the
// worker's dynamic activity for tool activity names no Go tool has).
type Toolsets struct {
	Sets []Toolset
	// GoTools names the worker's Go tools: a toolset tool of the same name
	// is a clash.
	GoTools []string
	// PayloadLimit bounds a result (see LimitResult). Zero: none.
	PayloadLimit int
}

// List is the ListToolsActivity function: every toolset's tools, each
// naming its toolset, in toolset order. A name offered twice fails the run
// (non-retryable ErrToolClash naming both).
func (t Toolsets) List(ctx context.Context) ([]protocol.ToolSpec, error) {
	ctx, stop := heartbeat(ctx)
	defer stop()
	names, err := NewToolNames(t.GoTools...)
	if err != nil {
		return nil, err.(*ClashError).Failure()
	}
	var out []protocol.ToolSpec
	for _, ts := range t.Sets {
		specs, err := ts.Tools(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range specs {
			if err := names.Add(s.Name, ts.Name()); err != nil {
				return nil, err.(*ClashError).Failure()
			}
			_, checks := ts.(ToolsetChecker)
			switch s.OnUnknown {
			case "", protocol.OnUnknownRetry, protocol.OnUnknownHold:
			case protocol.OnUnknownCheck:
				if !checks {
					return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("toolset %q: tool %s: OnUnknown %q, but the toolset has no Check method",
						ts.Name(), s.Name, s.OnUnknown), protocol.ErrBadInput, nil)
				}
			default:
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("toolset %q: tool %s: OnUnknown %q is not %q, %q or %q",
					ts.Name(), s.Name, s.OnUnknown, protocol.OnUnknownRetry, protocol.OnUnknownCheck, protocol.OnUnknownHold), protocol.ErrBadInput, nil)
			}
			s.Toolset = ts.Name()
			out = append(out, s)
		}
	}
	return out, nil
}

// Dispatch is the worker's dynamic activity: a call of a toolset's tool
// (Call), or the check of one (Check), by its activity type. Any other
// activity this worker lacks fails; it never runs a tool.
func (t Toolsets) Dispatch(ctx context.Context, args converter.EncodedValues) (any, error) {
	name := activity.GetInfo(ctx).ActivityType.Name
	switch {
	case strings.HasPrefix(name, protocol.ToolActivityPrefix):
		return t.Call(ctx, args)
	case strings.HasPrefix(name, protocol.CheckActivityPrefix):
		return t.Check(ctx, args)
	}
	return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no activity %s on this worker", name), protocol.ErrToolFailed, nil)
}

// Call is a call of a toolset's tool (its ToolInput names the toolset). It
// heartbeats while the tool runs and bounds the result as LimitResult
// does.
func (t Toolsets) Call(ctx context.Context, args converter.EncodedValues) (ToolOutput, error) {
	in, ts, err := t.route(ctx, args)
	if err != nil {
		return ToolOutput{}, err
	}
	ctx, stop := heartbeat(ctx)
	defer stop()
	ctx = context.WithValue(ctx, callKey{}, &in)
	return LimitResult(in.Tool, t.PayloadLimit, ts.Call)(ctx, in)
}

// Check is the check of a toolset's tool (ToolsetChecker), as a Go tool's
// check activity runs.
func (t Toolsets) Check(ctx context.Context, args converter.EncodedValues) (CheckOutput, error) {
	in, ts, err := t.route(ctx, args)
	if err != nil {
		return CheckOutput{}, err
	}
	c, ok := ts.(ToolsetChecker)
	if !ok {
		return CheckOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("toolset %q has no Check method: tool %s cannot be checked", in.Toolset, in.Tool), protocol.ErrToolFailed, nil)
	}
	return checkActivity(c.Check)(ctx, in)
}

// route decodes a toolset activity's input and finds its toolset.
func (t Toolsets) route(ctx context.Context, args converter.EncodedValues) (ToolInput, Toolset, error) {
	var in ToolInput
	if err := args.Get(&in); err != nil {
		return in, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("a toolset call's input does not decode: %v", err), protocol.ErrBadInput, nil)
	}
	for _, ts := range t.Sets {
		if ts.Name() == in.Toolset {
			return in, ts, nil
		}
	}
	name := ""
	if activity.IsActivity(ctx) {
		name = activity.GetInfo(ctx).ActivityType.Name
	}
	return in, nil, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("activity %s: no toolset %q on this worker", name, in.Toolset), protocol.ErrToolFailed, nil)
}

// ToolFromSpec declares a tool whose body is elsewhere (a toolset's): the
// workflow uses its spec and default options; its activity is the
// toolset dispatcher.
func ToolFromSpec(spec protocol.ToolSpec) *Tool {
	return &Tool{spec: spec, activity: protocol.ToolActivityName(spec.Name)}
}
