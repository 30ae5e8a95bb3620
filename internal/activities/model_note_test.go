package activities

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tulip-temporal/tulip/internal/threadstate"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
)

// An attempt that finds an answer an earlier attempt received (noted in
// its heartbeat) returns it without asking the model again: a retried
// model call bills no duplicate of an answer already had. Without a note
// the model is asked.
func TestModelNotedAnswer(t *testing.T) {
	var asked atomic.Int64
	models := NewModels(map[string]Model{"m": ModelFunc(func(ctx context.Context, req ModelRequest) (ModelResponse, error) {
		asked.Add(1)
		return ModelResponse{Text: "asked"}, nil
	})}, nil, nil)
	var suite testsuite.WorkflowTestSuite

	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(models.Respond)
	env.SetHeartbeatDetails(modelNote{Answer: &ModelResponse{Text: "noted", Usage: &threadstate.Usage{PromptTokens: 9}}})
	v, err := env.ExecuteActivity(models.Respond, ModelInput{Model: "m"})
	require.NoError(t, err)
	var got ModelResponse
	require.NoError(t, v.Get(&got))
	assert.Equal(t, "noted", got.Text)
	assert.Zero(t, asked.Load(), "the model was not asked again")

	env = suite.NewTestActivityEnvironment()
	env.RegisterActivity(models.Respond)
	v, err = env.ExecuteActivity(models.Respond, ModelInput{Model: "m"})
	require.NoError(t, err)
	require.NoError(t, v.Get(&got))
	assert.Equal(t, "asked", got.Text)
	assert.Equal(t, int64(1), asked.Load(), "control: no note, the model is asked")
}
