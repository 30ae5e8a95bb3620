package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// TestTypeScriptClient drives the wire protocol with a real non-Go client:
// the official TypeScript SDK (tests/ts, installed from npm by this test
// when it is not yet). A plain start with the documented fields continues
// the thread and serves its refund; a misspelled field is refused with
// tulip.BadInput; the tulip.log query answers.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed for the TypeScript protocol test")
	dir := npmModules(t, "@temporalio/client")

	_, tb, tq, thread := refundedThread(t)

	cmd := exec.CommandContext(ctxT(t), node, filepath.Join(dir, "thread.mjs"), server.Address(), tq, thread, "second")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err)
	var out struct {
		Result agentrun.RunResult `json:"result"`
		Bad    *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"bad"`
		Log []dedup.Record `json:"log"`
	}
	require.NoError(t, json.Unmarshal(stdout, &out), "%s", stdout)
	require.Len(t, out.Result.Trace, 1)
	assert.Equal(t, agentrun.OutcomeCached, out.Result.Trace[0].Outcome, "the TypeScript-started run continued the thread")
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
	require.NotNil(t, out.Bad)
	assert.Equal(t, protocol.ErrBadInput, out.Bad.Type)
	assert.Contains(t, out.Bad.Message, `unknown field "threadId"`)
	require.Len(t, out.Log, 2)
	assert.Equal(t, dedup.Cached, out.Log[1].Origin)
}
