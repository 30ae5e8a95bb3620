package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tulip-temporal/tulip/activities"
)

func msgs(texts ...string) []activities.Message {
	var out []activities.Message
	for _, t := range texts {
		out = append(out, activities.Message{Role: "user", Content: t})
	}
	return out
}

// The model activity rebuilds the conversation from its cache, turn after
// turn, from a cursor and the new messages only; the policy chooses what
// the model sees; a digest that does not match fails, never calls the model.
func TestModelCursor(t *testing.T) {
	var seen [][]activities.Message
	model := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		seen = append(seen, req.Messages)
		return activities.ModelResponse{Text: "ok"}, nil
	})
	m := activities.NewModels(map[string]activities.Model{"m": model}, nil, activities.LastTurns(2))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(m.Respond)

	conv := msgs("a")
	in := activities.ModelInput{Model: "m", Cursor: true, New: conv, Digest: activities.ExtendDigest("", conv...)}
	_, err := env.ExecuteActivity(m.Respond, in)
	require.NoError(t, err)
	// The workflow adds the answer and a new message; the cursor starts
	// after the answer (the activity remembers its own).
	conv = append(conv, activities.Message{Role: "assistant", Content: "ok"})
	base := activities.Cursor{Count: len(conv), Digest: activities.ExtendDigest("", conv...)}
	conv = append(conv, msgs("b")...)
	in = activities.ModelInput{Model: "m", Cursor: true, Base: &base, New: msgs("b"), Digest: activities.ExtendDigest("", conv...)}
	_, err = env.ExecuteActivity(m.Respond, in)
	require.NoError(t, err)
	conv = append(conv, activities.Message{Role: "assistant", Content: "ok"})
	base = activities.Cursor{Count: len(conv), Digest: activities.ExtendDigest("", conv...)}
	conv = append(conv, msgs("c")...)
	in = activities.ModelInput{Model: "m", Cursor: true, Base: &base, New: msgs("c"), Digest: activities.ExtendDigest("", conv...)}
	_, err = env.ExecuteActivity(m.Respond, in)
	require.NoError(t, err)
	require.Len(t, seen, 3)
	assert.Equal(t, conv[2:], seen[2], "LastTurns(2): from the second-last user message on")

	in.Digest = activities.ExtendDigest("", msgs("x")...)
	_, err = env.ExecuteActivity(m.Respond, in)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, activities.ErrConversation, app.Type())
	assert.Len(t, seen, 3, "the model was not called")
}

func TestConversationCacheBound(t *testing.T) {
	c := activities.NewConversationCache(2)
	m := &activities.Models{ByName: map[string]activities.Model{"m": activities.ModelFunc(func(context.Context, activities.ModelRequest) (activities.ModelResponse, error) {
		return activities.ModelResponse{}, nil
	})}, Cache: c}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(m.Respond)
	for _, s := range []string{"a", "b", "c", "d"} {
		_, err := env.ExecuteActivity(m.Respond, activities.ModelInput{Model: "m", Cursor: true, New: msgs(s), Digest: activities.ExtendDigest("", msgs(s)...)})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, c.Len())
}
