package tests

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/cmd/soak"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
)

// startChangedWorker starts a worker of tq with the plugin over opts and
// the extra interceptors.
func startChangedWorker(t *testing.T, c client.Client, tq string, opts tulip.Options, extra ...interceptor.WorkerInterceptor) sdkworker.Worker {
	t.Helper()
	plugin, err := tulip.NewPlugin(opts)
	require.NoError(t, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}, Interceptors: extra})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return w
}

// A change deployed under an open run without versioning: the run waits
// for an approval on the old build; the new build, which cannot replay
// it, takes the approval. Waiting for the run returns a typed
// tulip.Nondeterminism error naming the run (not a wait that never ends),
// the refund has not run, and the run is not lost: the old build back
// (a rollback) finishes it, refunding once. The control: the same steps
// with a build that can replay it complete.
func TestNondeterminismIsTyped(t *testing.T) {
	for _, incompatible := range []bool{true, false} {
		t.Run(fmt.Sprintf("incompatible=%v", incompatible), func(t *testing.T) {
			bill, err := billing.Start()
			require.NoError(t, err)
			t.Cleanup(bill.Close)
			c := dial(t, server.Address())
			tq := taskQueue("nondeterminism")
			b := build{refund: true, idempotent: true, hook: true}
			old := startChangedWorker(t, c, tq, b.options(bill))
			run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", Message: "refund ord-1", Hooks: []string{"approve_refund"},
				TaskTimeout: 2 * time.Second})
			require.NoError(t, err)
			res, err := run.Await(ctxT(t))
			require.NoError(t, err)
			require.Equal(t, agent.Interrupted, res.Status)
			old.Stop()

			var changed []interceptor.WorkerInterceptor
			if incompatible {
				changed = append(changed, &soak.StepAtStart{}) // a side effect at every start
			}
			next := startChangedWorker(t, c, tq, b.options(bill), changed...)
			require.NoError(t, run.ResumeBySignal(ctxT(t), agent.Approve(res.Interrupt.ID)))
			start := time.Now()
			res, err = run.Await(ctxT(t))
			if !incompatible {
				require.NoError(t, err)
				assert.Equal(t, agent.Completed, res.Status, res.Error)
				assert.Equal(t, 1, refundsAsked(bill))
				return
			}
			if err == nil || !tulip.Is(err, tulip.Nondeterminism) {
				desc, derr := c.DescribeWorkflowExecution(ctxT(t), run.ID(), "")
				t.Logf("describe: %v pending %v", derr, desc.GetPendingWorkflowTask())
				it := c.GetWorkflowHistory(ctxT(t), run.ID(), "", false, 0)
				for it.HasNext() {
					ev, _ := it.Next()
					t.Logf("%d %s %v", ev.GetEventId(), ev.GetEventType(), ev.GetWorkflowTaskFailedEventAttributes().GetCause())
				}
			}
			require.Error(t, err)
			t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
			assert.True(t, tulip.Is(err, tulip.Nondeterminism), "kind %q", tulip.KindOf(err))
			var nd *agent.NondeterminismError
			require.True(t, errors.As(err, &nd))
			assert.Equal(t, run.ID(), nd.WorkflowID)
			assert.Greater(t, nd.EventID, int64(0))
			assert.Zero(t, refundsAsked(bill), "the held refund did not run")

			next.Stop() // roll back: the old build takes the run again
			startChangedWorker(t, c, tq, b.options(bill))
			// Until the old build's first attempt, the run's task is still
			// the failed one.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
				res, err = run.Await(ctxT(t))
				if !tulip.Is(err, tulip.Nondeterminism) || time.Now().After(deadline) {
					break
				}
			}
			require.NoError(t, err)
			assert.Equal(t, agent.Completed, res.Status, res.Error)
			assert.Equal(t, 1, refundsAsked(bill), "the approved refund ran once")
		})
	}
}
