package agentrun

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// The run's details are written piece by piece: held to what the
// fmt-written version wrote (detailsReference), on random traces.
func TestDetailsText(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	texts := []string{"", "a", "ord|1", "`x`", "line\nbreak", "é", strings.Repeat("long-", 30)}
	text := func() string { return texts[rng.IntN(len(texts))] + texts[rng.IntN(len(texts))] }
	outcomes := []Outcome{OutcomeExecuted, OutcomeCached, OutcomeRejected, OutcomeCancelled, OutcomeDangling}
	for range 2000 {
		r := &run{in: RunInput{Agent: text(), ThreadID: text()}}
		r.turn, r.status = rng.IntN(50), StatusRunning
		if rng.IntN(2) == 0 {
			r.usage = &threadstate.Usage{PromptTokens: rng.IntN(9000), CompletionTokens: rng.IntN(900), CachedTokens: rng.IntN(90)}
			r.countsThread = rng.IntN(2) == 0
			if rng.IntN(2) == 0 {
				r.threadBase = &threadstate.Usage{PromptTokens: rng.IntN(9000)}
			}
		}
		for range rng.IntN(30) {
			l := TraceLine{Turn: rng.IntN(9), CallID: text(), Tool: text(), Outcome: outcomes[rng.IntN(len(outcomes))]}
			switch rng.IntN(5) {
			case 3:
				l.Unknown = &dedup.Unknown{Cause: text(), Checks: 1, Resolution: ResolvedApplied}
			case 0:
				n := rng.IntN(9)
				l.ServedFrom, l.Relation = &n, dedup.Relation(text())
			case 1:
				l.NearMiss = &dedup.NearMiss{Record: rng.IntN(9), Reason: dedup.ReasonArguments, Distance: rng.IntN(4),
					Differences: []dedup.Difference{{Path: "/" + text(), Was: json.RawMessage(`"a"`)}}}
			case 2:
				e := text()
				l.Error = &e
			}
			r.trace = append(r.trace, l)
		}
		require.Equal(t, detailsReference(r), r.details())
	}
}

func detailsReference(r *run) string {
	var executed, served, near int
	for _, l := range r.trace {
		switch l.Outcome {
		case OutcomeExecuted, OutcomeDangling:
			executed++
		case OutcomeCached:
			served++
		}
		if l.NearMiss != nil {
			near++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "**tulip** · agent `%s`", r.in.Agent)
	if r.in.ThreadID != "" {
		fmt.Fprintf(&sb, " · thread `%s`", r.in.ThreadID)
	}
	fmt.Fprintf(&sb, " · turn %d · %s\n\n", r.turn, r.status)
	fmt.Fprintf(&sb, "%d calls in this run: %d ran, **%d served from the log** (no event, body not run); near misses: %d.\n\n",
		len(r.trace), executed, served, near)
	if u := r.usage; u != nil {
		fmt.Fprintf(&sb, "Tokens, this run: %d prompt (%d cached), %d completion", u.PromptTokens, u.CachedTokens, u.CompletionTokens)
		if r.in.ThreadID != "" && r.countsThread {
			th := r.threadBase.Plus(u)
			fmt.Fprintf(&sb, "; the thread: %d prompt (%d cached), %d completion", th.PromptTokens, th.CachedTokens, th.CompletionTokens)
		}
		sb.WriteString(".\n\n")
	}
	if len(r.trace) == 0 {
		return sb.String()
	}
	from := 0
	if len(r.trace) > detailsRows {
		from = len(r.trace) - detailsRows
		fmt.Fprintf(&sb, "The latest %d:\n\n", detailsRows)
	}
	sb.WriteString("| turn | call | tool | outcome | why |\n| --- | --- | --- | --- | --- |\n")
	for _, l := range r.trace[from:] {
		outcome, why := string(l.Outcome), ""
		switch {
		case l.Outcome == OutcomeCached && l.ServedFrom != nil:
			outcome = "**served**"
			why = fmt.Sprintf("from record %d (%s)", *l.ServedFrom, l.Relation)
		case l.Unknown != nil:
			outcome = "ran · **outcome unknown: " + l.Unknown.Resolution + "**"
			why = l.Unknown.Cause
		case l.NearMiss != nil:
			outcome = "ran · **near miss**"
			why = l.NearMiss.String()
		case l.Error != nil && l.Outcome != OutcomeExecuted:
			why = *l.Error
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s |\n", l.Turn, cell(l.CallID, 40), cell(l.Tool, 40), outcome, cell(why, 120))
	}
	return sb.String()
}
