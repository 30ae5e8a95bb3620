package agentrun

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// A run's result is written as json.Marshal writes it, and as the SDK's
// JSON converter's payload: answers that hold what the trace is found by,
// a trace nil, empty or not, and every optional member.
func TestResultJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	texts := []string{"", "a", `"trace":null`, `,"trace":[]`, "<&>", "\u2028", "\"\\\n", "é", "trace"}
	text := func() string {
		s := ""
		for range rng.IntN(3) {
			s += texts[rng.IntN(len(texts))]
		}
		return s
	}
	dc := converter.GetDefaultDataConverter()
	for i := range 5000 {
		res := RunResult{Status: text(), Agent: text(), ThreadID: text(), Answer: text(), Turns: rng.IntN(9), Error: text(),
			TraceFrom: rng.IntN(3), ContinuedAsNew: rng.IntN(2)}
		switch rng.IntN(3) {
		case 0: // nil: null
		case 1:
			res.Trace = []TraceLine{}
		default:
			for range 1 + rng.IntN(3) {
				l := TraceLine{Turn: rng.IntN(9), CallID: text(), Tool: text(), Arguments: json.RawMessage(`{"order_id": "ord-1"}`), Outcome: OutcomeExecuted}
				if rng.IntN(2) == 0 {
					l.Result, l.Key = json.RawMessage(`{"refund_id":"rf-<1>"}`), text()
					l.NearMiss = &dedup.NearMiss{Record: 1, CallID: text(), Reason: dedup.NearMissReason(text()),
						Differences: []dedup.Difference{{Path: "/order_id", Was: json.RawMessage(`"ord-0"`), Now: json.RawMessage(`"ord-1"`)}}, Distance: 1}
				}
				if rng.IntN(3) == 0 {
					l.Unknown = &Unknown{Cause: text(), Checks: 1 + rng.IntN(3), Retries: rng.IntN(2), Resolution: ResolvedApplied}
				}
				res.Trace = append(res.Trace, l)
			}
		}
		if rng.IntN(4) == 0 {
			res.Interrupt = &Interrupt{ID: text(), Hook: text(), Reason: text()}
			res.TraceParts = []threadstate.Part{{Run: text(), From: 0, To: 2}}
			res.Summary = map[Outcome]int{OutcomeExecuted: 2, OutcomeCached: 1}
		}
		want, err := json.Marshal(res)
		require.NoError(t, err)
		got, err := encodeResult(res, nil)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "result %d", i)
		if res.Trace != nil {
			got, err = encodeResult(res, appendTraceLines(nil, res.Trace))
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "result %d, its lines encoded already", i)
		}

		p := activities.JSONPayload(got)
		sdk, err := dc.ToPayload(res)
		require.NoError(t, err)
		mine, err := dc.ToPayload(p)
		require.NoError(t, err)
		require.Equal(t, sdk.GetMetadata(), mine.GetMetadata())
		require.Equal(t, string(sdk.GetData()), string(mine.GetData()))
	}
}

// A continue-as-new input is json.Marshal's bytes, its agents' snapshots
// (with <, > and &, with whitespace, nil) written by AppendRaw; a text in
// the input that reads as a snapshot's placeholder leaves it all to
// json.Marshal.
func TestContinuedJSON(t *testing.T) {
	snap := func(s string) json.RawMessage { return json.RawMessage(s) }
	in := RunInput{Model: "m", Agent: "support", ThreadID: "t-1", Continued: &Carry{Turn: 3, Digest: "d",
		State: &threadstate.Checkpoint{Run: "r1", Agents: map[string]json.RawMessage{
			"support": snap(`{"records":[{"tool":"issue_refund","result":"<b>"}]}`), "billing": snap(`{"records":[]}`), "a": snap(`{}`)}}}}
	for _, tc := range []struct {
		name   string
		change func(in *RunInput)
	}{
		{"snapshots", func(*RunInput) {}},
		{"text before that reads as a placeholder", func(in *RunInput) { in.Model = "\x00tulip-snapshot-0" }},
		{"text after that reads as a placeholder", func(in *RunInput) {
			in.Continued.TraceParts = []threadstate.Part{{Run: "\x00tulip-snapshot-0"}}
		}},
		{"snapshot with whitespace", func(in *RunInput) {
			in.Continued.State.Agents["a"] = snap("{ \"x\" : [1, 2] }\n")
		}},
		{"no state", func(in *RunInput) { in.Continued.State = nil }},
		{"nil snapshot", func(in *RunInput) { in.Continued.State.Agents["a"] = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := in
			c, st := *in.Continued, *in.Continued.State
			st.Agents = maps.Clone(st.Agents)
			c.State = &st
			in.Continued = &c
			tc.change(&in)
			if in.Continued.State == nil {
				in.Continued = &c
			}
			want, err := json.Marshal(in)
			require.NoError(t, err)
			got, err := encodeContinued(in)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "json.Marshal's bytes: the size checks see what they saw")
		})
	}
}

// A replaying run makes no result only where making it could not have
// read the payload limit: every result resultUnsent passes encodes to at
// most MinPayloadLimit bytes. Results around that size, with texts that
// escape (the bound's worst case) and without; some pass, some do not.
func TestResultUnsent(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	chars := []rune{'a', 'b', '<', '"', 'é', '\n'}
	text := func(n int) string {
		rs := make([]rune, n)
		for i := range rs {
			rs[i] = chars[rng.IntN(len(chars))]
		}
		return string(rs)
	}
	str := func(n int) json.RawMessage { b, _ := json.Marshal(text(n)); return b }
	r := &run{features: features{carriesThread: true}}
	var passed, failed int
	for i := range 400 {
		res := RunResult{Status: StatusCompleted, Agent: "support", Answer: text(rng.IntN(MinPayloadLimit / 2))}
		for range rng.IntN(40) {
			res.Trace = append(res.Trace, TraceLine{Turn: 1, CallID: text(8), Tool: "issue_refund", Outcome: OutcomeExecuted,
				Arguments: json.RawMessage(`{"order_id": "ord-1"}`), Result: str(rng.IntN(8 << 10)), Key: text(20)})
		}
		enc, err := encodeResult(res, nil)
		require.NoError(t, err)
		if r.resultUnsent(res) {
			passed++
			require.LessOrEqual(t, len(enc), MinPayloadLimit, "result %d: unsent, but its size reads the payload limit", i)
		} else {
			failed++
		}
	}
	require.Positive(t, passed)
	require.Positive(t, failed)
	// One line, its size swept across the limit in small steps: the bound
	// is tight there, and a looser one passes results that are over.
	for n := MinPayloadLimit - 3000; n < MinPayloadLimit; n += 7 {
		res := RunResult{Status: StatusCompleted, Agent: "support", Trace: []TraceLine{{Turn: 1, CallID: "c1", Tool: "t",
			Outcome: OutcomeExecuted, Arguments: json.RawMessage(`{}`), Result: json.RawMessage(`"` + strings.Repeat("a", n) + `"`)}}}
		enc, err := encodeResult(res, nil)
		require.NoError(t, err)
		if r.resultUnsent(res) {
			require.LessOrEqual(t, len(enc), MinPayloadLimit, "a line of %d bytes: unsent, but its size reads the payload limit", n)
		}
	}

	res := RunResult{Status: StatusCompleted, Answer: text(MinPayloadLimit)}
	require.False(t, r.resultUnsent(res), "a result over the bound is made")
	res.Trace = []TraceLine{}
	require.False(t, r.resultUnsent(res), "a result over the bound with no lines is made")
	r.limit = -1
	require.True(t, r.resultUnsent(res), "no limit: nothing to check")
	bad := RunResult{Trace: []TraceLine{}, Checkpoint: &threadstate.Checkpoint{Agents: map[string]json.RawMessage{"a": json.RawMessage("{")}}}
	require.False(t, r.resultUnsent(bad), "a head that does not encode fails the run, as it did")
}

// A run on no thread that headUnsent says leaves its result unsent would
// have been said so by resultUnsent of its view, the view's trace inline:
// random runs around the size where the bound decides, their summaries
// from every outcome, an outcome the run does not know, and what a
// chain's earlier runs counted under long names.
func TestHeadUnsent(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	outs := append(slices.Clone(outcomes), Outcome("unknown-"+strings.Repeat("x", rng.IntN(40))))
	line := func(i, size int) TraceLine {
		return TraceLine{Turn: 1 + rng.IntN(3), CallID: fmt.Sprintf("c%d", i%7), Tool: "issue_refund", Outcome: outs[rng.IntN(len(outs))],
			Arguments: json.RawMessage(`{"order_id":"ord-1"}`), Result: json.RawMessage(`"` + strings.Repeat("a", size) + `"`), Key: "k"}
	}
	var unsent, made int
	for i := range 600 {
		r := &run{features: features{carriesThread: true, stateByRef: true}}
		r.status, r.in.Agent, r.turn = StatusCompleted, "support", 3
		// The answer brings the result near MinPayloadLimit; the lines and
		// the summary decide.
		r.answer = strings.Repeat("b", MinPayloadLimit-16<<10+rng.IntN(16<<10))
		for j := range rng.IntN(30) {
			r.trace = append(r.trace, line(j, rng.IntN(600)))
		}
		if rng.IntN(2) == 0 {
			r.summarized = map[Outcome]int{OutcomeExecuted: rng.IntN(1 << 20), Outcome(strings.Repeat("z", rng.IntN(3000))): 1 << 40}
		}
		if !r.headUnsent() {
			made++
			continue
		}
		unsent++
		view := r.view()
		require.Len(t, view.Trace, len(r.trace), "run %d: no trace by reference", i)
		require.Empty(t, view.TraceParts, "run %d: no trace by reference", i)
		require.True(t, r.resultUnsent(view), "run %d", i)
		enc, err := encodeResult(view, nil)
		require.NoError(t, err)
		require.LessOrEqual(t, len(enc), MinPayloadLimit, "run %d: unsent, but its size reads the payload limit", i)
	}
	require.Positive(t, unsent)
	require.Positive(t, made)

	r := &run{features: features{carriesThread: true, stateByRef: true}}
	r.status, r.answer = StatusCompleted, strings.Repeat("b", MinPayloadLimit)
	require.False(t, r.headUnsent(), "a result over the bound is made")
	r.limit = -1
	require.True(t, r.headUnsent(), "no limit: nothing to check")
}
