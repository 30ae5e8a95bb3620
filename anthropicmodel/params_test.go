package anthropicmodel

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
)

// A run's instructions follow the system prompt; its params override the
// model's temperature and max_tokens, and add top_p.
func TestRunInstructionsAndParams(t *testing.T) {
	temp, topP, maxOut := 0.2, 0.9, 77
	own := 0.7
	m, err := New(Options{Model: "claude-test", SystemPrompt: "You are support.", Temperature: &own})
	require.NoError(t, err)
	p := m.Params(tulip.ModelRequest{Instructions: "Answer in French.", Messages: []tulip.Message{{Role: "user", Content: "hi"}},
		Params: &tulip.ModelParams{Temperature: &temp, TopP: &topP, MaxOutputTokens: &maxOut}})
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var wire struct {
		MaxTokens   int      `json:"max_tokens"`
		Temperature *float64 `json:"temperature"`
		TopP        *float64 `json:"top_p"`
		System      []struct {
			Text string `json:"text"`
		} `json:"system"`
	}
	require.NoError(t, json.Unmarshal(b, &wire), "%s", b)
	assert.Equal(t, 77, wire.MaxTokens)
	require.NotNil(t, wire.Temperature)
	assert.Equal(t, 0.2, *wire.Temperature)
	require.NotNil(t, wire.TopP)
	assert.Equal(t, 0.9, *wire.TopP)
	require.Len(t, wire.System, 2)
	assert.Equal(t, "You are support.", wire.System[0].Text)
	assert.Equal(t, "Answer in French.", wire.System[1].Text)

	p = m.Params(tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "hi"}}})
	b, err = json.Marshal(p)
	require.NoError(t, err)
	wire.TopP = nil
	require.NoError(t, json.Unmarshal(b, &wire), "%s", b)
	assert.Equal(t, DefaultMaxTokens, wire.MaxTokens)
	assert.Equal(t, 0.7, *wire.Temperature)
	assert.Nil(t, wire.TopP)
}
