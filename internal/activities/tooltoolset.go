package activities

import (
	"context"
	"fmt"

	"github.com/tulip-temporal/tulip/internal/protocol"

	"go.temporal.io/sdk/temporal"
)

// A Go tool is a Toolset of one tool, so that tools and toolsets are one
// kind of thing in a worker's options.

// Name is the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Tools lists the tool's spec.
func (t *Tool) Tools(context.Context) ([]protocol.ToolSpec, error) {
	return []protocol.ToolSpec{t.spec}, nil
}

// Call runs the tool's body with in (inside the tool's activity: the body
// heartbeats and reads its key from the activity's context).
func (t *Tool) Call(ctx context.Context, in ToolInput) (ToolOutput, error) {
	if t.fn == nil {
		return ToolOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %s is a sub-agent: its run calls it as a child workflow, not a body", t.spec.Name), protocol.ErrBadInput, nil)
	}
	return t.fn(ctx, in)
}

var _ Toolset = (*Tool)(nil)

// PublicToolset adapts a toolset of package tulip's Toolset interface (or
// one of this package's, returned as it is) for this package, and
// InternalToolset does the reverse (its result is a tulip.Toolset).
// Package tulip sets both when it is initialized: it imports this
// package, which so cannot import it. The CLI and the module's tests,
// which build workers from internal options, use them.
var (
	PublicToolset   func(ts any) Toolset
	InternalToolset func(ts Toolset) any
)
