package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// hangProcess starts a crash worker that hangs at point at (tool or model)
// the first time it gets there, and returns it and its stdout.
func hangProcess(t *testing.T, bin, tq string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-address", server.Address(), "-task-queue", tq, "-billing", "http://127.0.0.1:1"}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	require.NoError(t, err, "worker process did not start")
	require.Equal(t, "ready\n", line)
	return cmd, r
}

// A worker SIGKILLed in the middle of a tool call, or of a model call: the
// activity it held is retried on another worker within its heartbeat
// timeout (5 s; tulip heartbeats for the body), not its start-to-close
// timeout (a minute for the tool, two for the model), and the run
// completes.
func TestFailoverWithinHeartbeat(t *testing.T) {
	bin := crashWorker(t)
	for _, at := range []string{"tool", "model"} {
		t.Run(at, func(t *testing.T) {
			tq := taskQueue(t.Name())
			dir := t.TempDir()
			events := filepath.Join(dir, "events")
			a, out := hangProcess(t, bin, tq, "-hang-at", at, "-marker", filepath.Join(dir, "marker"), "-events", events)
			c := dial(t, server.Address())
			h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "report", Message: "report"})
			require.NoError(t, err)
			line, err := out.ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "hanging "+at+"\n", line)

			killed := time.Now()
			require.NoError(t, a.Process.Kill())
			_, _ = a.Process.Wait()
			hangProcess(t, bin, tq, "-events", events)
			res, err := runclient.Await(ctxT(t), c, h, "")
			require.NoError(t, err)
			require.Equal(t, agentrun.StatusCompleted, res.Status)

			b, err := os.ReadFile(events)
			require.NoError(t, err)
			var retried time.Time
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var what string
				var attempt int
				var nanos int64
				_, err := fmt.Sscanf(l, "%s %d %d", &what, &attempt, &nanos)
				require.NoError(t, err, l)
				if what == at && attempt > 1 && retried.IsZero() {
					retried = time.Unix(0, nanos)
				}
			}
			require.False(t, retried.IsZero(), "the %s was retried: %s", at, b)
			recovery := retried.Sub(killed)
			t.Logf("%s: retried %.1f s after its worker was killed", at, recovery.Seconds())
			assert.Less(t, recovery, 20*time.Second, "within the heartbeat timeout, not the start-to-close timeout")
		})
	}
}

// A worker stopped with SIGTERM in the middle of a tool call lets the call
// finish (tulip's plugin gives a stopping worker 10 s), so the body runs
// once: no attempt is lost and retried.
func TestGracefulStopFinishesTheCall(t *testing.T) {
	bin := crashWorker(t)
	tq := taskQueue(t.Name())
	events := filepath.Join(t.TempDir(), "events")
	a, _ := hangProcess(t, bin, tq, "-events", events, "-tool-delay", "3s")
	c := dial(t, server.Address())
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "report", Message: "report"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "tool 1 ")
	}, time.Minute, 20*time.Millisecond, "the tool started")
	require.NoError(t, a.Process.Signal(syscall.SIGTERM))
	state, err := a.Process.Wait()
	require.NoError(t, err)
	assert.True(t, state.Success(), "the worker stopped cleanly: %v", state)
	hangProcess(t, bin, tq, "-events", events)
	res, err := runclient.Await(ctxT(t), c, h, "")
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	b, err := os.ReadFile(events)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), "tool "), "the body ran once, its attempt was not lost: %s", b)
}

// slowPage answers a worker's first conversation page query (tulip.page)
// after a delay: a busy worker that takes seconds to answer.
type slowPage struct {
	interceptor.WorkerInterceptorBase
	once  sync.Once
	delay time.Duration
}

func (s *slowPage) InterceptWorkflow(_ wf.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &slowPageInbound{s: s}
	i.Next = next
	return i
}

type slowPageInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	s *slowPage
}

func (i *slowPageInbound) HandleQuery(ctx wf.Context, in *interceptor.HandleQueryInput) (any, error) {
	if in.QueryType == threadstate.QueryPage {
		i.s.once.Do(func() { time.Sleep(i.s.delay) })
	}
	return i.Next.HandleQuery(ctx, in)
}

// A model call whose worker has not seen the thread's conversation reads
// it from the run (a query); when that read takes longer than the heartbeat
// timeout (a busy worker: here 7 s against 5 s), the attempt goes on,
// because tulip heartbeats for it from its start. The server's history
// says so: every model attempt that started is attempt 1. (Before, the
// heartbeat began with the model's own call: under the soak's load every
// attempt timed out, up to attempt 20.)
func TestSlowConversationReadKeepsTheAttempt(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	// The first run's answer is long, so that the thread's next run holds
	// its conversation by reference (over agentrun.InlineStateLimit).
	answer := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if len(req.Messages) == 1 {
			return activities.ModelResponse{Text: strings.Repeat("noted. ", 300<<10/7)}, nil
		}
		return activities.ModelResponse{Text: "noted"}, nil
	})
	opts := workerplugin.Options{Models: map[string]activities.Model{"note": answer}}
	first := startWorker(t, c, tq, opts)
	thread := "slow-read-" + tq
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{ThreadID: thread, TaskQueue: tq, Model: "note", Message: "one"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	first.Stop()

	// A new worker: its model activity has no cache of the conversation.
	plugin, err := workerplugin.NewPlugin(opts)
	require.NoError(t, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin},
		Interceptors:             []interceptor.WorkerInterceptor{&slowPage{delay: 7 * time.Second}},
		DeadlockDetectionTimeout: time.Minute})
	require.NoError(t, w.Start())
	defer w.Stop()
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{ThreadID: thread, TaskQueue: tq, Model: "note", Message: "two"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)

	models := 0
	for _, e := range history(t, c, h.WorkflowID, h.RunID).GetEvents() {
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			assert.Equal(t, int32(1), a.GetAttempt(), "event %d: an activity retried", e.GetEventId())
		}
		if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == protocol.ModelActivity {
			models++
		}
	}
	assert.Equal(t, 1, models)
}
