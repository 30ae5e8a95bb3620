package activities_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

func msgs(texts ...string) []threadstate.Message {
	var out []threadstate.Message
	for _, t := range texts {
		out = append(out, threadstate.Message{Role: "user", Content: t})
	}
	return out
}

// The model activity rebuilds the conversation from its cache, turn after
// turn, from a cursor and the new messages only; the policy chooses what
// the model sees; a digest that does not match fails, never calls the model.
func TestModelCursor(t *testing.T) {
	var seen [][]threadstate.Message
	model := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		seen = append(seen, req.Messages)
		return activities.ModelResponse{Text: "ok"}, nil
	})
	m := activities.NewModels(map[string]activities.Model{"m": model}, nil, activities.LastTurns(2))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(m.Respond)

	conv := msgs("a")
	in := activities.ModelInput{Model: "m", Cursor: true, New: conv, Digest: threadstate.ExtendDigest("", conv...)}
	_, err := env.ExecuteActivity(m.Respond, in)
	require.NoError(t, err)
	// The workflow adds the answer and a new message; the cursor starts
	// after the answer (the activity remembers its own).
	conv = append(conv, threadstate.Message{Role: "assistant", Content: "ok"})
	base := activities.Cursor{Count: len(conv), Digest: threadstate.ExtendDigest("", conv...)}
	conv = append(conv, msgs("b")...)
	in = activities.ModelInput{Model: "m", Cursor: true, Base: &base, New: msgs("b"), Digest: threadstate.ExtendDigest("", conv...)}
	_, err = env.ExecuteActivity(m.Respond, in)
	require.NoError(t, err)
	conv = append(conv, threadstate.Message{Role: "assistant", Content: "ok"})
	base = activities.Cursor{Count: len(conv), Digest: threadstate.ExtendDigest("", conv...)}
	conv = append(conv, msgs("c")...)
	in = activities.ModelInput{Model: "m", Cursor: true, Base: &base, New: msgs("c"), Digest: threadstate.ExtendDigest("", conv...)}
	_, err = env.ExecuteActivity(m.Respond, in)
	require.NoError(t, err)
	require.Len(t, seen, 3)
	assert.Equal(t, conv[2:], seen[2], "LastTurns(2): from the second-last user message on")

	in.Digest = threadstate.ExtendDigest("", msgs("x")...)
	_, err = env.ExecuteActivity(m.Respond, in)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, protocol.ErrConversation, app.Type())
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
		_, err := env.ExecuteActivity(m.Respond, activities.ModelInput{Model: "m", Cursor: true, New: msgs(s), Digest: threadstate.ExtendDigest("", msgs(s)...)})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, c.Len())
}

// The cache is bounded by bytes too: conversations of megabyte messages
// never keep more than the bound alive, ancestors of cached nodes
// included (a long run's early turns count while a later turn is cached),
// and every request is answered with its whole conversation.
func TestConversationCacheByteBound(t *testing.T) {
	const bound = 4 << 20
	c := activities.NewConversationCacheBytes(0, bound)
	var seen int
	m := &activities.Models{ByName: map[string]activities.Model{"m": activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		seen = 0
		for _, msg := range req.Messages {
			seen += len(msg.Content)
		}
		return activities.ModelResponse{Text: "ok"}, nil
	})}, Cache: c}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(m.Respond)
	big := func(i int) threadstate.Message {
		return threadstate.Message{Role: "user", Content: strings.Repeat(string(rune('a'+i%26)), 1<<20)}
	}
	respond := func(base *activities.Cursor, conv []threadstate.Message, n int) []threadstate.Message {
		t.Helper()
		in := activities.ModelInput{Model: "m", Cursor: true, Base: base, New: conv[len(conv)-n:], Digest: threadstate.ExtendDigest("", conv...)}
		_, err := env.ExecuteActivity(m.Respond, in)
		require.NoError(t, err)
		want := 0
		for _, msg := range conv {
			want += len(msg.Content)
		}
		assert.Equal(t, want, seen, "the model saw the whole conversation")
		assert.LessOrEqual(t, c.Bytes(), int64(bound), "the cache keeps at most its bound alive")
		return append(conv, threadstate.Message{Role: "assistant", Content: "ok"})
	}
	// One run of three turns, each adding a megabyte: about 3 MiB, held
	// as a chain (each turn's node, and the answer remembered after it).
	var conv []threadstate.Message
	var base *activities.Cursor
	for i := range 3 {
		conv = respond(base, append(conv, big(i)), 1)
		base = &activities.Cursor{Count: len(conv), Digest: threadstate.ExtendDigest("", conv...)}
	}
	assert.Greater(t, c.Bytes(), int64(3<<20), "the run's three turns are held")
	// Other runs' conversations, a megabyte each: the bound holds; the
	// long run's nodes go first (least recently used), ancestors and all.
	for i := range 6 {
		respond(nil, []threadstate.Message{big(10 + i)}, 1)
	}
	assert.LessOrEqual(t, c.Bytes(), int64(bound))
	// One message over the bound: answered, and not kept.
	huge := threadstate.Message{Role: "user", Content: strings.Repeat("z", bound+1)}
	respond(nil, []threadstate.Message{huge}, 1)
	assert.LessOrEqual(t, c.Bytes(), int64(bound))
}
