package agentrun

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// The size bounds never pass the encoding's size (a bound over the limit
// must mean the encoding is too): random texts with what encoding escapes,
// whitespace in raw values, empty and absent members.
func TestSizeBoundsBelowEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", "a", "ord-1", "<&>", "\u2028", "\"\\\n\t", "é", "\x01", "tulip-0123456789abcdef0123456789abcdef01234567", "\xff", "😀", "\xe2\x80"}
	text := func() string {
		s := ""
		for range rng.IntN(4) {
			s += texts[rng.IntN(len(texts))]
		}
		return s
	}
	raws := []string{"", "0", "{}", `"<a&b> "`, "\"\u2029\"", `{"a": 1,  "b" : [1, 2]}`, "\n[ ]\n", `"x y"`, `{"refund_id":"rf-1","amount":120.0}`, "null"}
	raw := func() json.RawMessage {
		s := raws[rng.IntN(len(raws))]
		if s == "" {
			return nil
		}
		return json.RawMessage(s)
	}
	for i := range 20000 {
		l := TraceLine{Turn: rng.IntN(2000), CallID: text(), Tool: text(), Arguments: raw(), Outcome: Outcome(text()), Result: raw(), Key: text()}
		if rng.IntN(3) == 0 {
			e := text()
			l.Error = &e
		}
		if rng.IntN(5) == 0 {
			n := rng.IntN(100)
			l.ServedFrom, l.Relation = &n, dedup.Relation(text())
		}
		if rng.IntN(3) == 0 {
			l.NearMiss = &dedup.NearMiss{Record: rng.IntN(100), CallID: text(), Reason: dedup.NearMissReason(text()), Distance: rng.IntN(5)}
			for range rng.IntN(3) {
				l.NearMiss.Differences = append(l.NearMiss.Differences, dedup.Difference{Path: text(), Was: raw(), Now: raw()})
			}
		}
		if rng.IntN(4) == 0 {
			k := rng.IntN(1000)
			l.ResultIn = &k
		}
		if rng.IntN(4) == 0 {
			l.Unknown = &Unknown{Cause: text(), Checks: rng.IntN(12), Retries: rng.IntN(3), Resolution: text()}
		}
		b, err := json.Marshal(l)
		require.NoError(t, err)
		require.Equal(t, string(b), string(appendTraceLine(nil, &l)), "line %d: written as json.Marshal writes it", i)
		require.LessOrEqual(t, lineMin(&l), len(b), "line %d: %s", i, b)
		require.GreaterOrEqual(t, lineMax(&l), len(b), "line %d: %s", i, b)
		s := text()
		bs, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, len(bs), strMax(s), "%q", s)

		m := threadstate.Message{Role: text(), Content: text(), ToolCallID: text(), Served: rng.IntN(2) == 0}
		for range rng.IntN(3) {
			m.ToolCalls = append(m.ToolCalls, threadstate.ToolCall{ID: text(), Name: text(), Arguments: text()})
		}
		b, err = json.Marshal(m)
		require.NoError(t, err)
		require.LessOrEqual(t, messageMin(&m), len(b), "message %d: %s", i, b)
		require.GreaterOrEqual(t, messageMax(&m), len(b), "message %d: %s", i, b)

		lines := []TraceLine{l, l, l}
		b, err = json.Marshal(lines)
		require.NoError(t, err)
		require.Equal(t, string(b), string(appendTraceLines(nil, lines)))
		require.False(t, linesOver(lines, len(b)), "lines %d: %s", i, b)
		require.False(t, linesUnder(lines, len(b)-1), "lines %d: %s", i, b)
		require.Equal(t, len(b) > len(b)/2, linesOverLimit(lines, len(b)/2))
		require.False(t, linesOverLimit(lines, len(b)))
	}
}

// A run's state in full is over the limit whenever fullStateOver says so:
// records full and thin, messages of every kind.
func TestFullStateBoundBelowEncoding(t *testing.T) {
	for _, n := range []int{0, 1, 10, 300} {
		r := &run{callState: callState{log: dedup.NewLog()}, runID: "run-1", in: RunInput{Agent: "a"}}
		resp := r.log.BeginResponse()
		for i := range n {
			args, err := dedup.Parse(fmt.Sprintf(`{"order_id": "ord-%d",  "amount": 120.0, "note": "<&>"}`, i), dedup.Limits{})
			require.NoError(t, err)
			r.log.Append(dedup.Record{Tool: "issue_refund", Response: resp, Run: r.runID, Turn: 1, CallID: fmt.Sprint("c", i),
				Origin: dedup.Executed, Key: "tulip-0123456789", Result: json.RawMessage(`{ "refund_id": "rf-1" }`)}, args)
			r.messages = append(r.messages, threadstate.Message{Role: "tool", ToolCallID: fmt.Sprint("c", i), Content: `{"refund_id":"rf-1"}`})
		}
		r.messages = append(r.messages, threadstate.Message{Role: "assistant", ToolCalls: []threadstate.ToolCall{{ID: "c0", Name: "issue_refund", Arguments: "{}"}}})
		st, err := r.refState(false, true)
		require.NoError(t, err)
		size := jsonSize(st)
		require.False(t, r.fullStateOver(false, size), "%d records: the bound passes the encoding (%d bytes)", n, size)
		if n == 300 {
			require.True(t, r.fullStateOver(false, size/2), "the bound is too loose to serve")
		}
	}
}
