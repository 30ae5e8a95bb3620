package tulip_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// Errors say what they are: a refused tool declaration, a tool's own
// failure, a missing thread each have a kind, read by KindOf through any
// wrapping; and a run's status is a type of its own.
func TestKinds(t *testing.T) {
	body := func(ctx context.Context, a struct{}) (string, error) { return "", nil }
	_, badName := tulip.NewTool(tulip.ToolSpec{Name: "no spaces allowed"}, body)
	_, badSub := tulip.AgentTool(tulip.ToolSpec{Name: "sub", Parameters: json.RawMessage(`{}`)}, tulip.AgentToolOptions{})
	var app *temporal.ApplicationError
	toolErr := tulip.ToolError("declined", "billing.Declined", true)
	cases := []struct {
		name string
		err  error
		kind tulip.ErrorKind
	}{
		{"NewTool refuses a name", badName, tulip.BadInput},
		{"AgentTool refuses Parameters", badSub, tulip.BadInput},
		{"a tool's Ambiguous failure", tulip.ToolError("timed out", tulip.Ambiguous, false), tulip.Ambiguous},
		{"not found", serviceerror.NewNotFound("workflow not found"), tulip.NotFound},
		{"not found, wrapped", fmt.Errorf("agent: thread %q: %w", "t1", serviceerror.NewNotFound("workflow not found")), tulip.NotFound},
		{"nil", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.kind, tulip.KindOf(c.err), "%v", c.err)
			if c.err != nil {
				assert.NotContains(t, c.err.Error(), "\n")
			}
		})
	}
	if assert.True(t, errors.As(toolErr, &app)) {
		assert.Equal(t, "billing.Declined", app.Type(), "a tool's own kind is its type in history")
		assert.True(t, app.NonRetryable())
	}
	var st agent.Status = agent.Completed
	assert.Equal(t, agent.Status("completed"), st)
	res := agent.Result{Status: agent.Interrupted}
	assert.Equal(t, agent.Interrupted, res.Status)
	assert.Equal(t, agent.Cached, agent.Served, "Served (deprecated) is Cached")
	assert.Equal(t, agent.Outcome("cached"), agent.Cached, "one word: the wire's")
}
