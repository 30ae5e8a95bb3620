package tests

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// approvalWorld is a worker whose refunds reach a billing service (the
// witness of what ran): the demo tools, refund_order (a refund that asks
// approval, tulip.approval) and the hook approve_refund (a hook's
// interrupt before every issue_refund).
type approvalWorld struct {
	tb   *demo.Toolbox
	bill *billing.Server
	tq   string
}

func newApprovalWorld(t *testing.T, run scenario.Run) approvalWorld {
	t.Helper()
	bill, err := billing.Start()
	require.NoError(t, err)
	t.Cleanup(func() { bill.Close() })
	tb := demo.NewToolbox()
	tb.UseBilling(billing.Client{BaseURL: bill.URL()})
	refundOrder := activities.MustTool(protocol.ToolSpec{Name: "refund_order", Approval: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"}}}`)},
		func(ctx context.Context, a billing.RefundRequest) (billing.Receipt, error) {
			return billing.Client{BaseURL: bill.URL()}.Refund(ctx, a.OrderID, a.Amount)
		})
	hs := demo.Hooks()
	hs["approve_refund"] = hooks.Approve("issue_refund", "refunds need a person's approval")
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: append(tb.Tools(), refundOrder), Hooks: hs,
		Models: map[string]activities.Model{"m": run.Model()}})
	return approvalWorld{tb: tb, bill: bill, tq: tq}
}

// refundedOrders are the order ids billing made refunds for (the calls of
// a response run at once: in any order).
func (w approvalWorld) refundedOrders() []string {
	var out []string
	for _, rc := range w.bill.Refunds() {
		out = append(out, rc.OrderID)
	}
	return out
}

// lastLines is each call's last trace line (its final outcome).
func lastLines(trace []agentrun.TraceLine) map[string]agentrun.TraceLine {
	out := map[string]agentrun.TraceLine{}
	for _, l := range trace {
		out[l.CallID] = l
	}
	return out
}

// A refund that asks approval (tulip.approval), with a hook that
// upper-cases order ids and one that blocks paging: the held refund shows
// its post-hook arguments, and the resume runs exactly those (billing
// receives ORD-1, not the model's ord-1); the calls held after it go
// through the hooks when performed: the second refund is upper-cased and
// not held again (the resume approved every call it held), the page is
// cancelled (its body never runs; its cancel is recorded, rule 3), the
// lookup is upper-cased. Fails on the code before "tulip-held-args",
// which re-parsed the model's arguments and bypassed the hooks.
func TestApprovalRunsWhatWasApproved(t *testing.T) {
	done := "done"
	run := scenario.Run{Turns: []scenario.Turn{turn(
		call("c1", "refund_order", `{"order_id": "ord-1", "amount": 10}`),
		call("c2", "refund_order", `{"order_id": "ord-2", "amount": 20}`),
		call("c3", "page_oncall", `{"case_id": "k", "summary": "s"}`),
		call("c4", "lookup_order", `{"order_id": "ord-3"}`),
	)}, Resumes: []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{{Text: &done}}}}}
	w := newApprovalWorld(t, run)
	c := dial(t, server.Address())
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: w.tq, Model: "m", Hooks: []string{"upper_order_id", "block_page_oncall"}})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	assert.Equal(t, agentrun.ApprovalHook, res.Interrupt.Hook)
	require.Len(t, res.Interrupt.Held, 4)
	require.Len(t, res.Trace, 4)
	assert.Equal(t, agentrun.OutcomeHeld, res.Trace[0].Outcome)
	assert.JSONEq(t, `{"order_id": "ORD-1", "amount": 10}`, string(res.Trace[0].Arguments), "the held line shows what will run")
	assert.Empty(t, w.bill.Refunds(), "nothing ran before the approval")

	_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
	require.NoError(t, err)
	res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status, "the resumed response is not held again")
	last := lastLines(res.Trace)
	assert.Equal(t, agentrun.OutcomeDangling, last["c1"].Outcome)
	assert.JSONEq(t, `{"order_id": "ORD-1", "amount": 10}`, string(last["c1"].Arguments))
	assert.Equal(t, agentrun.OutcomeDangling, last["c2"].Outcome)
	assert.JSONEq(t, `{"order_id": "ORD-2", "amount": 20}`, string(last["c2"].Arguments))
	assert.Equal(t, agentrun.OutcomeCancelled, last["c3"].Outcome)
	require.NotNil(t, last["c3"].Error)
	assert.Equal(t, "paging is disabled", *last["c3"].Error)
	assert.Equal(t, agentrun.OutcomeDangling, last["c4"].Outcome)
	assert.JSONEq(t, `{"order_id": "ORD-3", "status": "shipped"}`, string(last["c4"].Result), "the lookup's body received the rewritten id")

	assert.ElementsMatch(t, []string{"ORD-1", "ORD-2"}, w.refundedOrders(), "billing refunded what was approved, rewritten")
	inv := w.tb.Invocations()
	assert.Equal(t, 0, inv["page_oncall"], "the blocked call's body never ran")
	assert.Equal(t, 1, inv["lookup_order"])

	recs, err := runclient.Log(ctxT(t), c, h)
	require.NoError(t, err)
	require.Len(t, recs, 1, "performed held calls are never recorded; the cancel is")
	assert.Equal(t, "page_oncall", recs[0].Tool)
	assert.Equal(t, "cancelled", string(recs[0].Origin))
}

// The same with a hook's interrupt (approve_refund, installed after the
// upper-casing hook) and the blocking hook installed while the run waits:
// the held refund shows, and runs, the upper-cased id; the second refund
// passes the hooks installed when it is performed (upper-cased, not held
// again by approve_refund); the page is cancelled by the hook installed
// meanwhile. Fails on the code before "tulip-held-args" (the held line
// showed the model's ord-1, and billing received it).
func TestHookInterruptRunsWhatWasApproved(t *testing.T) {
	done := "done"
	run := scenario.Run{Turns: []scenario.Turn{turn(
		call("c1", "issue_refund", `{"order_id": "ord-1", "amount": 120}`),
		call("c2", "issue_refund", `{"order_id": "ord-2", "amount": 120}`),
		call("c3", "page_oncall", `{"case_id": "k", "summary": "s"}`),
	)}, Resumes: []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{{Text: &done}}}}}
	w := newApprovalWorld(t, run)
	c := dial(t, server.Address())
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: w.tq, Model: "m", Hooks: []string{"upper_order_id", "approve_refund"}})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	assert.Equal(t, "approve_refund", res.Interrupt.Hook)
	require.Len(t, res.Trace, 3)
	assert.JSONEq(t, `{"order_id": "ORD-1", "amount": 120}`, string(res.Trace[0].Arguments),
		"the held line shows the arguments the hooks before the interrupting one left")

	require.NoError(t, update(t, c, h.WorkflowID, agentrun.UpdateHooks, agentrun.HooksInput{Install: []string{"block_page_oncall"}}))
	_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
	require.NoError(t, err)
	res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status, "approve_refund does not hold the resumed response again")
	last := lastLines(res.Trace)
	assert.Equal(t, agentrun.OutcomeDangling, last["c1"].Outcome)
	assert.JSONEq(t, `{"order_id": "ORD-1", "amount": 120}`, string(last["c1"].Arguments))
	assert.Equal(t, "refund:ORD-1:120:v1", last["c1"].Key)
	assert.Equal(t, agentrun.OutcomeDangling, last["c2"].Outcome)
	assert.JSONEq(t, `{"order_id": "ORD-2", "amount": 120}`, string(last["c2"].Arguments))
	assert.Equal(t, agentrun.OutcomeCancelled, last["c3"].Outcome)

	assert.ElementsMatch(t, []string{"ORD-1", "ORD-2"}, w.refundedOrders())
	var keys []string
	for _, req := range w.bill.Witnesses() {
		keys = append(keys, req.Key)
	}
	assert.ElementsMatch(t, []string{"refund:ORD-1:120:v1", "refund:ORD-2:120:v1"}, keys, "billing's witness: the approved calls, once each")
	assert.Equal(t, 0, w.tb.Invocations()["page_oncall"], "the blocked call's body never ran")
}
