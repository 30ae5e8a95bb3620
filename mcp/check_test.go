package mcp

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/mcp/mcptest"
)

// A connection that breaks after the request was sent leaves the call's
// outcome unknown: tulip.Ambiguous (retryable, unless the tool holds or
// checks), and the server did refund. The check tool named in the
// server's config answers: applied, with the refund, for that key; not
// applied for another. One that was never sent (nothing listens) is a
// transport error.
func TestCheckNamedByServerConfig(t *testing.T) {
	rs := mcptest.NewRefundServer()
	t.Cleanup(rs.Close)
	srv := Server{Name: "refunds", URL: rs.URL, Checks: map[string]string{"refund": "refund_status"}}
	ts := newToolset(t, srv, Options{})
	infos := annotations(t, ts)
	assert.Equal(t, "check", infos["refund"].Spec.OnUnknown, "a tool with a check checks, trusted or not")
	assert.Equal(t, "refund_status", infos["refund"].Behaviour.Check)
	assert.Equal(t, "runs every time; if lost, asks refund_status", infos["refund"].Behaviour.String())

	in := tulip.ToolInput{Tool: "refund", CallID: "c1", IdempotencyKey: "refund:c1", Arguments: `{"order": "o-1"}`}
	rs.LoseNextAnswer()
	_, err := ts.Call(ctxT(t), in)
	ae := appErr(t, err)
	assert.Equal(t, string(tulip.Ambiguous), ae.Type(), "%v", err)
	assert.False(t, ae.NonRetryable())
	assert.Contains(t, ae.Message(), "may have run")
	assert.Equal(t, 1, rs.Refunds("o-1"), "the server refunded")

	res, applied, err := ts.Check(ctxT(t), in)
	require.NoError(t, err)
	assert.True(t, applied)
	assert.JSONEq(t, `{"refund_id": "re-o-1-1"}`, string(res))

	res, applied, err = ts.Check(ctxT(t), tulip.ToolInput{Tool: "refund", CallID: "c2", IdempotencyKey: "refund:c2", Arguments: `{"order": "o-2"}`})
	require.NoError(t, err)
	assert.False(t, applied)
	assert.Nil(t, res)
	assert.Equal(t, 1, rs.Refunds("o-1"), "a check refunds nothing")

	// Answers of another form fail the check, non-retryably.
	rs.AnswerBadly(true)
	_, _, err = ts.Check(ctxT(t), in)
	ae = appErr(t, err)
	assert.Equal(t, string(ErrCheckAnswer), ae.Type(), "%v", err)
	assert.True(t, ae.NonRetryable())
	rs.AnswerBadly(false)

	// A tool without a check has none to ask.
	_, _, err = ts.Check(ctxT(t), tulip.ToolInput{Tool: "refund_status", Arguments: `{}`})
	assert.Equal(t, string(ErrUnknownTool), appErr(t, err).Type())

	// Turned away unhandled (503), or by a server that forgot the
	// session (404, as after a restart): nothing ran. A forgotten session
	// is made again at once, and the call goes through.
	rs.RefuseNext()
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "refund", CallID: "c4", IdempotencyKey: "refund:c4", Arguments: `{"order": "o-4"}`})
	ae = appErr(t, err)
	assert.Equal(t, string(ErrTransport), ae.Type(), "%v", err)
	assert.Zero(t, rs.Refunds("o-4"))
	rs.ForgetSessions()
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "refund", CallID: "c5", IdempotencyKey: "refund:c5", Arguments: `{"order": "o-5"}`})
	require.NoError(t, err)
	assert.Equal(t, 1, rs.Refunds("o-5"))

	// Nothing listens: the request was never sent.
	rs.Close()
	_, err = ts.Call(ctxT(t), tulip.ToolInput{Tool: "refund", CallID: "c3", IdempotencyKey: "refund:c3", Arguments: `{"order": "o-3"}`})
	ae = appErr(t, err)
	assert.Equal(t, string(ErrTransport), ae.Type(), "%v", err)
	assert.False(t, ae.NonRetryable())
}

// A check that names a tool the server does not list fails the listing,
// naming it; Validate refuses a tool checking itself.
func TestCheckConfigRefused(t *testing.T) {
	rs := mcptest.NewRefundServer()
	t.Cleanup(rs.Close)
	for _, checks := range []map[string]string{{"refund": "refund_lookup"}, {"refnud": "refund_status"}} {
		ts := newToolset(t, Server{Name: "refunds", URL: rs.URL, Checks: checks}, Options{})
		_, err := ts.Tools(ctxT(t))
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "Checks", ce.Field)
		t.Log(err)
	}
	err := Server{Name: "refunds", URL: rs.URL, Checks: map[string]string{"refund": "refund"}}.Validate()
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "cannot check itself"), err.Error())
}
