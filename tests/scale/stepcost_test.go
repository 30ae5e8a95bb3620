package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// stepTimes runs one agent run of turns turns (one 64-byte call each) and
// returns each turn's time in ms, taken at its model: from a turn's model
// call to the next turn's (a turn is a model call and its tool call; the
// run's continues-as-new fall inside the turns they follow).
func stepTimes(b testing.TB, turns int) []float64 {
	var mu sync.Mutex
	at := make([]time.Time, turns+2)
	inner := padded(turns, 64)
	m := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		mu.Lock()
		if req.Turn < len(at) && at[req.Turn].IsZero() {
			at[req.Turn] = time.Now()
		}
		mu.Unlock()
		return inner.Respond(ctx, req)
	})
	c, tq, tb := setup(b, nil, nil, map[string]activities.Model{"m": m})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	_, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "append", MaxTurns: turns + 1})
	require.NoError(b, err)
	require.Equal(b, agentrun.StatusCompleted, res.Status)
	require.Equal(b, turns, tb.Invocations()["audit_append"])
	out := make([]float64, turns)
	for i := 1; i <= turns; i++ {
		require.False(b, at[i].IsZero() || at[i+1].IsZero(), "turn %d was timed", i)
		out[i-1] = float64(at[i+1].Sub(at[i])) / float64(time.Millisecond)
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// slope is the least-squares line's slope of ys over their index (from 1).
func slope(ys []float64) float64 {
	n := float64(len(ys))
	var sx, sy, sxx, sxy float64
	for i, y := range ys {
		x := float64(i + 1)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkStepCost: does a step cost more late in a run? One run of
// 1,000 turns per iteration, timed at its model. It reports, as medians
// over the iterations (run it -benchtime 5x), the last 100 turns' mean
// time over the first 100's (goal: ≤ 1.1) and the slope of a turn's time
// over its number in ms per step (the least-squares line; vercel/workflow
// publishes 0.074 ms per step for its own), and the mean ms a turn.
func BenchmarkStepCost(b *testing.B) {
	const turns = 1000
	var ratios, slopes, means []float64
	for range b.N {
		d := stepTimes(b, turns)
		ratios = append(ratios, mean(d[turns-100:])/mean(d[:100]))
		slopes = append(slopes, slope(d))
		means = append(means, mean(d))
	}
	r := median(ratios)
	b.ReportMetric(r, "last100/first100")
	b.ReportMetric(median(slopes), "ms-per-step-slope")
	b.ReportMetric(median(means), "ms/turn")
	goal := "met"
	if r > 1.1 {
		goal = "open"
	}
	b.Logf("last 100 turns over the first 100: median %.3f of %v (goal <= 1.1: %s); slope %.5f ms per step (%v); %.2f ms a turn",
		r, fmtAll(ratios), goal, median(slopes), fmtAll(slopes), median(means))
}

func fmtAll(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.4f", x)
	}
	return "[" + out + "]"
}
