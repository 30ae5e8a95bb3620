package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// The package's constants are the wire's, as the workflow spells them.
func TestConstantsAreTheWires(t *testing.T) {
	assert.Equal(t, agentrun.StatusRunning, string(Running))
	assert.Equal(t, agentrun.StatusInterrupted, string(Interrupted))
	assert.Equal(t, agentrun.StatusCompleted, string(Completed))
	assert.Equal(t, agentrun.StatusFailed, string(Failed))
	assert.Equal(t, agentrun.ClientToolsHook, ClientToolsHook)
	assert.Equal(t, agentrun.UnknownHook, UnknownHook)
	for pub, in := range map[Outcome]agentrun.Outcome{Executed: agentrun.OutcomeExecuted, Cached: agentrun.OutcomeCached,
		Cancelled: agentrun.OutcomeCancelled, Held: agentrun.OutcomeHeld, Dangling: agentrun.OutcomeDangling,
		Dropped: agentrun.OutcomeDropped, Rejected: agentrun.OutcomeRejected} {
		assert.Equal(t, string(in), string(pub))
	}
}

// A result crosses from the internal client whole: every JSON member the
// run wrote is in the public value's JSON, except the internal ones a
// whole result has resolved (where its trace lines are, a served result's
// message number).
func TestResultKeepsEveryField(t *testing.T) {
	one, msg := 1, "boom"
	nm := &dedup.NearMiss{Record: 2, CallID: "c0", Reason: dedup.ReasonArguments, Distance: 1,
		Differences: []dedup.Difference{{Path: "/amount", Was: json.RawMessage(`120`), Now: json.RawMessage(`130`)}}}
	in := &agentrun.RunResult{Status: agentrun.StatusInterrupted, Agent: "a", ThreadID: "t", Answer: "x", Turns: 3,
		Trace: []agentrun.TraceLine{{Turn: 1, CallID: "c1", Tool: "refund", Arguments: json.RawMessage(`{"a":1}`),
			Outcome: agentrun.OutcomeCached, Result: json.RawMessage(`"ok"`), Error: &msg, ServedFrom: &one,
			Relation: dedup.EarlierTurn, Key: "k", NearMiss: nm,
			Unknown: &agentrun.Unknown{Cause: "lost", Checks: 2, Retries: 1, Holds: 1, Resolution: agentrun.ResolvedRetried}}},
		Interrupt: &agentrun.Interrupt{ID: "i", Turn: 2, Hook: "h", Reason: "r"},
		Error:     "e", ContinuedAsNew: 2, Summary: map[agentrun.Outcome]int{agentrun.OutcomeCached: 1},
		ClientTools: []string{"ct"}, StoreError: "s", Usage: &threadstate.Usage{PromptTokens: 3, CompletionTokens: 2},
		ThreadUsage: &threadstate.Usage{PromptTokens: 9, CompletionTokens: 4, CachedTokens: 1},
		Checkpoint: &threadstate.Checkpoint{Run: "r", Agents: map[string]json.RawMessage{"": json.RawMessage(`{"records":[]}`)},
			Messages: []threadstate.Message{{Role: "user", Content: "hi"}}, Minted: map[string]int{"": 2}},
		State: &threadstate.Checkpoint{Run: "r", Conversation: &threadstate.ConversationRef{Count: 3, Digest: "d"}}}
	out, err := result(in)
	require.NoError(t, err)
	assert.Equal(t, Served, out.Trace[0].Outcome)
	assert.Equal(t, "/amount", out.Trace[0].NearMiss.Differences[0].Path)
	assert.Equal(t, "earlier_turn", out.Trace[0].Relation)
	assert.Equal(t, "hi", out.Checkpoint.Messages[0].Content)
	assert.Equal(t, "r", out.State.Run)

	members := func(v any) map[string]any {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	assert.Equal(t, members(in), members(out))

	rec := dedup.Record{Seq: 1, Tool: "refund", Arguments: `{"a":1}`, Response: 2, Run: "r", Turn: 1, CallID: "c",
		Origin: dedup.Executed, Result: json.RawMessage(`"ok"`), Error: &dedup.ToolError{Type: "T", Message: "m"},
		ServedFrom: &one, Relation: dedup.SameResponse, Key: "k", NearMiss: nm,
		Unknown: &dedup.Unknown{Cause: "lost", Checks: 1, Resolution: "applied"}}
	recs, err := recode[[]Record]([]dedup.Record{rec})
	require.NoError(t, err)
	assert.Equal(t, "T", recs[0].Error.Type)
	assert.Equal(t, members(rec), members(recs[0]))
}

// The conversion's cost beside what reading the result costs anyway: the
// SDK decodes a run's result from its JSON payload (the baseline here), and
// the conversion encodes and decodes it once more. A 1,000-line trace with
// a 1 KiB result per line.
func BenchmarkResultConversion(b *testing.B) {
	in := &agentrun.RunResult{Status: agentrun.StatusCompleted, Turns: 1000}
	res := json.RawMessage(`"` + strings.Repeat("x", 1024) + `"`)
	for i := range 1000 {
		in.Trace = append(in.Trace, agentrun.TraceLine{Turn: i + 1, CallID: "c", Tool: "refund",
			Arguments: json.RawMessage(`{"order_id":"ord-1","amount":120}`), Outcome: agentrun.OutcomeExecuted, Result: res, Key: "k"})
	}
	payload, err := json.Marshal(in)
	require.NoError(b, err)
	b.Run("baseline-sdk-decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r agentrun.RunResult
			if err := json.Unmarshal(payload, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-and-convert", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r agentrun.RunResult
			if err := json.Unmarshal(payload, &r); err != nil {
				b.Fatal(err)
			}
			if _, err := result(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
