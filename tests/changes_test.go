package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
)

// build is one build of an agent: its refund tool's declaration, whether
// it has lookup_order, its hooks, its model's instructions.
type build struct {
	refund     bool // issue_refund is declared (else removed)
	idempotent bool // and idempotent
	lookup     bool // lookup_order, a new tool
	hook       bool // approve_refund, a new hook
	model2     bool // another model behind the name "m"
}

// options are b's worker options over billing: the model refunds ord-1
// (turn 1), looks the order up when the build has lookup_order (turn 2),
// then answers.
func (b build) options(bill *billing.Server) tulip.Options {
	var tools []tulip.Toolset
	if b.refund {
		tools = append(tools, tulip.MustTool(tulip.ToolSpec{Name: "issue_refund", Idempotent: b.idempotent},
			func(ctx context.Context, a struct {
				OrderID string      `json:"order_id"`
				Amount  json.Number `json:"amount"`
			}) (billing.Receipt, error) {
				return billing.Client{BaseURL: bill.URL()}.Refund(ctx, a.OrderID, a.Amount)
			}))
	}
	if b.lookup {
		tools = append(tools, tulip.MustTool(tulip.ToolSpec{Name: "lookup_order", Idempotent: true},
			func(_ context.Context, a struct {
				OrderID string `json:"order_id"`
			}) (string, error) {
				return "shipped", nil
			}))
	}
	model := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		switch {
		case req.Phase == 0 && req.PhaseTurn == 1:
			if b.model2 { // another model: its own call ids, the arguments in another order
				return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("call_%d_v2", len(req.Messages)), Name: "issue_refund",
					Arguments: `{"amount": 20, "order_id": "ord-1"}`}}}, nil
			}
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("r%d", len(req.Messages)), Name: "issue_refund",
				Arguments: `{"order_id":"ord-1","amount":20}`}}}, nil
		case req.Phase == 0 && req.PhaseTurn == 2 && b.lookup:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "l1", Name: "lookup_order", Arguments: `{"order_id":"ord-1"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "done"}, nil
	})
	opts := tulip.Options{Tools: tools, Models: map[string]tulip.Model{"m": model}}
	if b.hook {
		opts.Hooks = map[string]tulip.Hook{"approve_refund": tulip.Approve("issue_refund", "refunds need a person")}
	}
	return opts
}

// What a change to the agent does to an open thread, by kind: the thread's
// first run on the old build, its next run (the same refund asked again)
// on the new one, billing the witness of every refund's body. Each kind
// works on the open thread, or is refused in the run's own terms (a call
// of a removed tool is rejected, as any unknown tool's); none fails the
// run or wedges it. A library upgrade across a workflow.GetVersion change
// is the checked-in histories' replay (TestReplayHistories).
func TestChangesOnOpenThreads(t *testing.T) {
	base := build{refund: true, idempotent: true}
	cases := []struct {
		name          string
		old, new      build
		instructions  string
		outcome       agent.Outcome // of the repeated refund
		refunds       int           // billing's count after both runs
		interrupted   bool          // the next run holds the refund (the new hook)
		extraOutcomes map[string]agent.Outcome
	}{
		{name: "a new tool", old: base, new: build{refund: true, idempotent: true, lookup: true},
			outcome: agent.Cached, refunds: 1, extraOutcomes: map[string]agent.Outcome{"l1": agent.Executed}},
		{name: "a removed tool", old: base, new: build{},
			outcome: agent.Rejected, refunds: 1},
		{name: "idempotent made non-idempotent", old: base, new: build{refund: true},
			outcome: agent.Executed, refunds: 2},
		{name: "non-idempotent made idempotent", old: build{refund: true}, new: base,
			outcome: agent.Cached, refunds: 1},
		{name: "a changed prompt", old: base, new: base, instructions: "Be brief.",
			outcome: agent.Cached, refunds: 1},
		{name: "a changed model", old: base, new: build{refund: true, idempotent: true, model2: true},
			outcome: agent.Cached, refunds: 1},
		{name: "a new hook", old: base, new: build{refund: true, idempotent: true, hook: true},
			outcome: agent.Dropped, refunds: 1, interrupted: true},
	}
	c := dial(t, server.Address())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bill, err := billing.Start()
			require.NoError(t, err)
			t.Cleanup(bill.Close)
			tq := taskQueue("changes")
			thread := fmt.Sprintf("changes-%d", time.Now().UnixNano())
			old := startPublicWorker(t, c, tq, tc.old.options(bill))
			run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "refund ord-1"})
			require.NoError(t, err)
			res, err := run.Await(ctxT(t))
			require.NoError(t, err)
			require.Equal(t, agent.Completed, res.Status, res.Error)
			require.Equal(t, 1, refundsAsked(bill))
			old.Stop()

			startPublicWorker(t, c, tq, tc.new.options(bill))
			opts := agent.Options{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "refund ord-1 again", Instructions: tc.instructions}
			if tc.new.hook {
				opts.Hooks = []string{"approve_refund"}
			}
			run, err = agent.Start(ctxT(t), c, opts)
			require.NoError(t, err)
			res, err = run.Await(ctxT(t))
			require.NoError(t, err)
			if tc.interrupted {
				require.Equal(t, agent.Interrupted, res.Status, "the new hook asks about the repeated refund")
				_, err = run.Resume(ctxT(t), agent.Decline(res.Interrupt.ID, "it was refunded already"))
				require.NoError(t, err)
				res, err = run.Await(ctxT(t))
				require.NoError(t, err)
			}
			require.Equal(t, agent.Completed, res.Status, res.Error)
			var repeat agent.Outcome
			for _, l := range res.Trace {
				if l.Tool == "issue_refund" {
					repeat = l.Outcome
				}
			}
			assert.Equal(t, tc.outcome, repeat, "the repeated refund")
			for id, o := range tc.extraOutcomes {
				assert.Equal(t, o, outcomeOf(res.Trace, id), id)
			}
			assert.Equal(t, tc.refunds, refundsAsked(bill), "billing: refunds whose body ran")
		})
	}
}
