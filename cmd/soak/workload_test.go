package soak

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A soak interrupted (Ctrl-C cancels its context) starts no more runs:
// before, each thread kept asking for runs, every one failing at once,
// until the phase's duration or run count was spent, and the soak did not
// stop.
func TestPlayThreadsStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var asked atomic.Int32
	finished := make(chan struct{})
	go func() {
		(&workload{}).playThreads(ctx, 8, func(int) *run { asked.Add(1); return &run{} }, func(*run) {})
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("playThreads did not return once its context was done")
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("%d runs asked for after the context was done", n)
	}
}
