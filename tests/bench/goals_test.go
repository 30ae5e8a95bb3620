package bench

import (
	"fmt"
	"slices"
	"time"
)

// The goals of issue 58, as the benchmarks check them: each prints its
// ratio against the arm measured in the same run, the median and spread of
// its blocks, and whether the median meets the goal. No benchmark fails on
// a timing.
const (
	// replayGoal bounds BenchmarkReplay's plugin/plain-sdk at N=100 and
	// N=1,000.
	replayGoal = 1.05
	// throughputGoal is BenchmarkThroughput's least tulip/plain-sdk.
	throughputGoal = 1.0
)

// goalBlocks is how many blocks a benchmark's iterations are judged in:
// each block's ratio is one sample of the median.
const goalBlocks = 5

// blockRatios splits two arms' per-iteration times into k contiguous
// blocks (fewer when there are fewer iterations) and returns each block's
// num/den: the ratio of the block's summed times.
func blockRatios(num, den []time.Duration, k int) []float64 {
	k = max(min(k, len(num)), 1)
	var out []float64
	for b := range k {
		lo, hi := b*len(num)/k, (b+1)*len(num)/k
		var n, d time.Duration
		for i := lo; i < hi; i++ {
			n += num[i]
			d += den[i]
		}
		if d > 0 {
			out = append(out, float64(n)/float64(d))
		}
	}
	return out
}

// spread is a set of ratios read as a goal reads them.
type spread []float64

// median is the middle ratio (the mean of the middle two when even; 0 when
// empty).
func (s spread) median() float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// String is "median M (lo–hi, n blocks)".
func (s spread) String() string {
	if len(s) == 0 {
		return "no blocks"
	}
	return fmt.Sprintf("median %.3f (%.3f–%.3f, %d blocks)", s.median(), slices.Min(s), slices.Max(s), len(s))
}

// verdict is how a goal check reads: ok, or OVER.
func verdict(met bool) string {
	if met {
		return "ok"
	}
	return "OVER"
}
