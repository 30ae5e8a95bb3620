package agentrun_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// TestConformanceInTestEnvironment runs every public conformance case (each
// names the rule it shows) through the workflow in the SDK's test
// environment.
func TestConformanceInTestEnvironment(t *testing.T) {
	cases, err := scenario.LoadCases("../../testdata/conformance")
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Log("rule:", c.Rule)
			lines, sum, _ := newHarness(t).play(c.Scenario)
			for _, e := range c.Check(lines, sum) {
				t.Error(e)
			}
		})
	}
}

// TestNearMissCases plays the near-miss cases (testdata/nearmiss, one per
// reason of docs/rules.md "Why did it run again?") the same way.
func TestNearMissCases(t *testing.T) {
	cases, err := scenario.LoadCases("../../testdata/nearmiss")
	require.NoError(t, err)
	require.Len(t, cases, 7)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Log("rule:", c.Rule)
			lines, sum, _ := newHarness(t).play(c.Scenario)
			for _, e := range c.Check(lines, sum) {
				t.Error(e)
			}
		})
	}
}

func byCall(lines []scenario.Line) map[string]scenario.Line {
	m := map[string]scenario.Line{}
	for _, l := range lines {
		m[l.CallID] = l
	}
	return m
}

// Rule 1 (reject): what cannot be a call is refused before anything else,
// with a clear error and no record.
func TestRuleRejectBeforeAnythingElse(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65)
	big := `{"order_id": "` + strings.Repeat("x", 300<<10) + `", "amount": 1}`
	sc := &scenario.Scenario{Runs: []scenario.Run{{Hooks: []string{"block_page_oncall"}, Turns: []scenario.Turn{{ToolCalls: []threadstate.ToolCall{
		{ID: "deep", Name: "audit_append", Arguments: deep},
		{ID: "big", Name: "issue_refund", Arguments: big},
		{ID: "array", Name: "issue_refund", Arguments: `[1]`},
		{ID: "trailing", Name: "issue_refund", Arguments: `{"order_id": "o", "amount": 1} x`},
		{ID: "hooked", Name: "page_oncall", Arguments: `{"case_id": 1`},
		{ID: "unknown", Name: "drop_database", Arguments: `{}`},
		{ID: "ok", Name: "issue_refund", Arguments: `{"order_id": "o", "amount": 1}`},
	}}}}}}
	h := newHarness(t)
	lines, sum, outs := h.play(sc)
	got := byCall(lines)
	for id, want := range map[string]string{"deep": "too_deep", "big": "too_large", "array": "not_object",
		"trailing": "trailing_data", "hooked": "invalid_json", "unknown": `unknown tool "drop_database"`} {
		assert.Equal(t, agentrun.OutcomeRejected, got[id].Outcome, id)
		require.NotNil(t, got[id].Error, id)
		assert.Contains(t, *got[id].Error, want, id)
	}
	assert.Equal(t, agentrun.OutcomeExecuted, got["ok"].Outcome)
	assert.Equal(t, 1, sum.BodyInvocations["issue_refund"])
	assert.Equal(t, 0, sum.BodyInvocations["audit_append"])
	assert.Equal(t, agentrun.StatusCompleted, outs[0].status)
}

// Limits are options: a run with a larger depth limit accepts what the
// default refuses.
func TestRuleLimitsAreOptions(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65)
	h := newHarness(t)
	sc := &scenario.Scenario{Runs: []scenario.Run{{Turns: []scenario.Turn{{ToolCalls: []threadstate.ToolCall{
		{ID: "deep", Name: "audit_append", Arguments: deep}}}}}}}
	env := h.env(sc)
	env.ExecuteWorkflow(agentrun.WorkflowName, agentrun.RunInput{Model: scenario.ModelName("t", 0), Limits: limits(100)})
	var res agentrun.RunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, agentrun.OutcomeExecuted, res.Trace[0].Outcome)
}

// Rules 2-3: hooks run in order; a cancelled call is recorded with the
// model's (pre-hook) arguments and its message is served to a later twin.
func TestRuleCancelRecordsModelArguments(t *testing.T) {
	sc := parseScenario(t, `{"runs": [{"hooks": ["upper_order_id", "block_page_oncall"], "turns": [
		{"tool_calls": [{"id": "c1", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\", \"order_id\": \"ord-1\"}"}]},
		{"remove_hooks": ["upper_order_id", "block_page_oncall"],
		 "tool_calls": [{"id": "c2", "name": "page_oncall", "arguments": "{\"summary\": \"s\", \"case_id\": \"k\", \"order_id\": \"ord-1\"}"}]}
	]}]}`)
	h := newHarness(t)
	lines, sum, _ := h.play(sc)
	got := byCall(lines)
	assert.Equal(t, agentrun.OutcomeCancelled, got["c1"].Outcome)
	assert.JSONEq(t, `{"case_id": "k", "summary": "s", "order_id": "ord-1"}`, string(got["c1"].Arguments), "pre-hook arguments")
	// c2 (no hooks now) matches only because the record kept ord-1, not
	// the upper-cased ORD-1.
	assert.Equal(t, agentrun.OutcomeCached, got["c2"].Outcome)
	assert.Equal(t, "paging is disabled", *got["c2"].Error)
	assert.Equal(t, 0, sum.BodyInvocations["page_oncall"])
}

// Rule 4: an interrupt holds the call and every later call of the same
// response; perform_dangling=false drops them; nothing held is recorded.
func TestRuleInterruptHoldsRestOfResponse(t *testing.T) {
	sc := parseScenario(t, `{"runs": [{"hooks": ["approve_isolate_host"], "turns": [
		{"tool_calls": [
			{"id": "c1", "name": "issue_refund", "arguments": "{\"order_id\": \"o\", \"amount\": 1}"},
			{"id": "c2", "name": "isolate_host", "arguments": "{\"host\": \"web-1\"}"},
			{"id": "c3", "name": "issue_refund", "arguments": "{\"order_id\": \"o\", \"amount\": 1}"}
		]}],
		"resumes": [{"answer": "no", "perform_dangling": false, "turns": [
			{"tool_calls": [{"id": "c4", "name": "issue_refund", "arguments": "{\"order_id\": \"o\", \"amount\": 1}"}]}
		]}]}]}`)
	h := newHarness(t)
	lines, sum, outs := h.play(sc)
	var c2, c3 []agentrun.Outcome
	for _, l := range lines {
		switch l.CallID {
		case "c2":
			c2 = append(c2, l.Outcome)
		case "c3":
			c3 = append(c3, l.Outcome)
		}
	}
	assert.Equal(t, []agentrun.Outcome{agentrun.OutcomeHeld, agentrun.OutcomeDropped}, c2)
	assert.Equal(t, []agentrun.Outcome{agentrun.OutcomeHeld, agentrun.OutcomeDropped}, c3, "a later call of the same response is held too")
	got := byCall(lines)
	assert.Equal(t, agentrun.OutcomeExecuted, got["c4"].Outcome, "after resume nothing matches")
	assert.Equal(t, 2, sum.BodyInvocations["issue_refund"])
	assert.Equal(t, 0, sum.BodyInvocations["isolate_host"])
	assert.Equal(t, agentrun.StatusCompleted, outs[0].status)
}

// A twin of a call still executing in the same response is served its
// outcome when it settles, a failure included.
func TestSameResponseTwinOfAFailingCall(t *testing.T) {
	sc := parseScenario(t, `{"runs": [{"turns": [
		{"tool_calls": [{"id": "c1", "name": "charge_card", "arguments": "{\"card\": \"4242\", \"amount\": 10}"},
		                {"id": "c2", "name": "charge_card", "arguments": "{\"amount\": 10, \"card\": \"4242\"}"}]}]}]}`)
	h := newHarness(t)
	lines, sum, _ := h.play(sc)
	got := byCall(lines)
	assert.Equal(t, agentrun.OutcomeExecuted, got["c1"].Outcome)
	assert.Equal(t, agentrun.OutcomeCached, got["c2"].Outcome)
	require.NotNil(t, got["c2"].Error)
	assert.Contains(t, *got["c2"].Error, "card declined")
	assert.Equal(t, 1, sum.BodyInvocations["charge_card"])
}

// Beyond the seed: a served result answers the new call's id and says it
// was served; every execution carries a stable downstream key, the same
// for a served twin, and new for each mint of a non-idempotent tool.
func TestServedCallAnswersItsOwnIDAndKeysAreStable(t *testing.T) {
	sc := parseScenario(t, `{"runs": [{"turns": [
		{"tool_calls": [{"id": "c1", "name": "issue_refund", "arguments": "{\"order_id\": \"o\", \"amount\": 120.0}"}]},
		{"tool_calls": [{"id": "c2", "name": "issue_refund", "arguments": "{\"order_id\": \"o\", \"amount\": 120}"},
		                {"id": "c3", "name": "mint_case_id", "arguments": "{}"}]},
		{"tool_calls": [{"id": "c4", "name": "mint_case_id", "arguments": "{}"}]}
	]}]}`)
	var seen []activities.ModelRequest
	h := newHarness(t)
	h.opts = func(o *workerplugin.Options) {
		inner := o.Models[scenario.ModelName("t", 0)]
		o.Models[scenario.ModelName("t", 0)] = activities.ModelFunc(func(ctx contextT, req activities.ModelRequest) (activities.ModelResponse, error) {
			seen = append(seen, req)
			return inner.Respond(ctx, req)
		})
	}
	lines, _, _ := h.play(sc)
	got := byCall(lines)
	assert.Equal(t, got["c1"].Key, got["c2"].Key)
	assert.NotEqual(t, got["c3"].Key, got["c4"].Key)
	assert.Equal(t, "refund:o:120:v1", got["c1"].Key, "the demo refund's business key: 120.0 and 120 agree")
	assert.True(t, strings.HasPrefix(got["c3"].Key, "tulip-"), "the default derivation")
	// The model's third request carries c2's result under c2's id, marked served.
	require.Len(t, seen, 4)
	var c2msg *threadstate.Message
	for i, m := range seen[2].Messages {
		if m.ToolCallID == "c2" {
			c2msg = &seen[2].Messages[i]
		}
	}
	require.NotNil(t, c2msg)
	assert.True(t, c2msg.Served)
	assert.JSONEq(t, string(got["c1"].Result), c2msg.Content)
}

func TestKeyTemplate(t *testing.T) {
	h := newHarness(t)
	refund := activities.MustTool(protocol.ToolSpec{Name: "refund", Idempotent: true, KeyTemplate: "refund:{order_id}:{amount}:v1"},
		func(ctx contextT, a map[string]any) (string, error) { return activities.IdempotencyKey(ctx), nil })
	h.opts = func(o *workerplugin.Options) { o.Tools = append(o.Tools, refund) }
	sc := parseScenario(t, `{"runs": [{"turns": [
		{"tool_calls": [{"id": "c1", "name": "refund", "arguments": "{\"order_id\": \"ORD-1\", \"amount\": 120.0}"}]}]}]}`)
	lines, _, _ := h.play(sc)
	assert.Equal(t, "refund:ORD-1:120:v1", lines[0].Key)
	assert.JSONEq(t, `"refund:ORD-1:120:v1"`, string(lines[0].Result), "the body reads the key from its context")
}

// The turn limit is an option, and hitting it is a typed, non-retryable
// failure whose details hold the run's trace.
func TestMaxTurns(t *testing.T) {
	h := newHarness(t)
	forever := activities.ModelFunc(func(_ contextT, req activities.ModelRequest) (activities.ModelResponse, error) {
		return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: fmt.Sprintf("m%d", req.Turn), Name: "mint_case_id", Arguments: "{}"}}}, nil
	})
	h.opts = func(o *workerplugin.Options) { o.Models["forever"] = forever }
	env := h.env(&scenario.Scenario{})
	env.ExecuteWorkflow(agentrun.WorkflowName, agentrun.RunInput{Model: "forever", MaxTurns: 3})
	err := env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, protocol.ErrMaxTurns, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	var res agentrun.RunResult
	require.NoError(t, appErr.Details(&res))
	assert.Equal(t, agentrun.StatusFailed, res.Status)
	assert.Len(t, res.Trace, 3)
}

func TestBadRunInput(t *testing.T) {
	h := newHarness(t)
	for name, in := range map[string]agentrun.RunInput{
		"no model":     {},
		"unknown hook": {Model: "m", Hooks: []string{"nope"}},
	} {
		env := h.env(&scenario.Scenario{})
		env.ExecuteWorkflow(agentrun.WorkflowName, in)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(env.GetWorkflowError(), &appErr), name)
		assert.True(t, appErr.NonRetryable(), name)
		// A refused run answers the queries any run answers: failed, no log.
		v, err := env.QueryWorkflow(agentrun.QueryState)
		require.NoError(t, err, name)
		var state agentrun.StateView
		require.NoError(t, v.Get(&state), name)
		assert.Equal(t, agentrun.StatusFailed, state.Status, name)
		assert.Equal(t, appErr.Message(), state.Error, name)
		v, err = env.QueryWorkflow(agentrun.QueryLog)
		require.NoError(t, err, name)
		var log []json.RawMessage
		require.NoError(t, v.Get(&log), name)
		assert.NotNil(t, log, name)
		assert.Empty(t, log, name)
	}
	env := h.env(&scenario.Scenario{})
	env.ExecuteWorkflow(agentrun.WorkflowName, agentrun.RunInput{Model: "no-such-model"})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr))
	var res agentrun.RunResult
	require.NoError(t, appErr.Details(&res))
	assert.Contains(t, res.Error, "no-such-model")
}

// The default downstream key: the same for the same call after a resume
// (which matches nothing and so executes again) and in a later run on the
// thread; different for another agent, or other arguments.
func TestDefaultKeyIsStable(t *testing.T) {
	sc := parseScenario(t, `{"runs": [
		{"thread_id": "t-1", "hooks": ["approve_isolate_host"], "turns": [
			{"tool_calls": [{"id": "c1", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"}]},
			{"tool_calls": [{"id": "c2", "name": "isolate_host", "arguments": "{\"host\": \"h\"}"}]}],
		 "resumes": [{"answer": "ok", "turns": [
			{"tool_calls": [{"id": "c3", "name": "page_oncall", "arguments": "{\"summary\": \"s\", \"case_id\": \"k\"}"}]}]}]},
		{"thread_id": "t-1", "agent": "other", "turns": [
			{"tool_calls": [{"id": "c4", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"},
			                {"id": "c5", "name": "page_oncall", "arguments": "{\"case_id\": \"k2\", \"summary\": \"s\"}"}]}]}
	]}`)
	lines, _, _ := newHarness(t).play(sc)
	got := byCall(lines)
	assert.Equal(t, agentrun.OutcomeExecuted, got["c3"].Outcome, "after resume the call executes again")
	assert.Equal(t, got["c1"].Key, got["c3"].Key, "with the same key, so the downstream service dedups it")
	assert.NotEqual(t, got["c1"].Key, got["c4"].Key, "another agent, another key")
	assert.NotEqual(t, got["c4"].Key, got["c5"].Key)
}
