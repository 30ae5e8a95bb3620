package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// A thread the server never had is kind NotFound, from the server itself:
// reading its state, and resuming a run on it.
func TestNotFoundIsAKind(t *testing.T) {
	c := dial(t, server.Address())
	thread := fmt.Sprintf("never-started-%d", time.Now().UnixNano())
	_, err := agent.Thread(ctxT(t), c, thread)
	require.Error(t, err)
	assert.Equal(t, tulip.NotFound, tulip.KindOf(err), "%v", err)
	_, err = agent.Attach(c, thread, "").Resume(ctxT(t), agent.Approve("int-1"))
	require.Error(t, err)
	assert.Equal(t, tulip.NotFound, tulip.KindOf(err), "%v", err)
}
