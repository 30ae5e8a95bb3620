package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/devserver/cluster"
)

// stepsWorkflow runs n steps; step i waits for the signal "next" carrying
// i (a repeated signal, sent again after a fault, is ignored), then runs
// the activity "cluster-step". It returns the steps done.
func stepsWorkflow(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second},
	})
	next := workflow.GetSignalChannel(ctx, "next")
	for i := 0; i < n; {
		var k int
		next.Receive(ctx, &k)
		if k != i {
			continue
		}
		if err := workflow.ExecuteActivity(ctx, "cluster-step", i).Get(ctx, nil); err != nil {
			return i, err
		}
		i++
	}
	return n, nil
}

// stepLog records when each workflow's steps ran, for the test to wait on.
type stepLog struct {
	mu   sync.Mutex
	done map[string]int // workflow ID -> steps done
	cond *sync.Cond
}

func newStepLog() *stepLog {
	l := &stepLog{done: map[string]int{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *stepLog) step(ctx context.Context, i int) error {
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	l.mu.Lock()
	defer l.mu.Unlock()
	if i+1 > l.done[id] {
		l.done[id] = i + 1
	}
	l.cond.Broadcast()
	return nil
}

// wait waits until workflowID has done n steps, or limit passes.
func (l *stepLog) wait(workflowID string, n int, limit time.Duration) bool {
	timer := time.AfterFunc(limit, func() {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(limit)
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.done[workflowID] < n {
		if time.Now().After(deadline) {
			return false
		}
		l.cond.Wait()
	}
	return true
}

// TestClusterFailover runs workflows on a real multi-process cluster
// (PostgreSQL, two history processes over 8 shards, matching, frontend,
// worker) and takes it apart: SIGKILL of the history process that owns a
// running workflow's shard (the shard moves to the other one, the workflow
// goes on; the time it takes is the shard takeover time), matching killed
// and restarted, frontend killed and restarted (the client reconnects),
// PostgreSQL restarted. After each fault the running workflow takes its
// next step and a new workflow runs to completion.
func TestClusterFailover(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process groups and SIGKILL: Linux only")
	}
	if _, err := cluster.FindPostgres(""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (.ci/run installs it with scripts/install-test-deps)", err)
		}
		t.Skipf("%v", err)
	}
	bin := filepath.Join(t.TempDir(), "tulip")
	buildStart := time.Now()
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tulip-temporal/tulip/cmd/tulip").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("go build tulip: %s", time.Since(buildStart).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Binary: bin, Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			dumpLogs(t, dir)
		}
	})
	t.Logf("cluster startup (PostgreSQL, schemas, 5 processes, namespace, all 8 shards take writes): %s", time.Since(start).Round(time.Millisecond))

	cl, err := client.Dial(client.Options{HostPort: c.FrontendAddress(), Namespace: c.Namespace(), Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	tq := taskQueue("cluster")
	steps := newStepLog()
	w := sdkworker.New(cl, tq, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(stepsWorkflow, workflow.RegisterOptions{Name: "cluster-steps"})
	w.RegisterActivityWithOptions(steps.step, activity.RegisterOptions{Name: "cluster-step"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	// startWorkflow starts id until the server takes it: right after a
	// fault (PostgreSQL restarted, say) a frontend can answer a start with
	// Unavailable or, while its namespace cache refills, NamespaceNotFound.
	// A retried start that had landed returns the same run (the default
	// reuse behaviour), so retrying cannot start two.
	startWorkflow := func(id string, n int) client.WorkflowRun {
		t.Helper()
		for {
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			run, err := cl.ExecuteWorkflow(sctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq, WorkflowTaskTimeout: 2 * time.Second}, "cluster-steps", n)
			scancel()
			if err == nil {
				return run
			}
			require.NoError(t, ctx.Err(), "start %s: %v", id, err)
			t.Logf("start %s: %v (retrying)", id, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	// signal sends step i to id until the server takes it.
	signal := func(id string, i int) {
		t.Helper()
		for {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			err := cl.SignalWorkflow(sctx, id, "", "next", i)
			scancel()
			if err == nil {
				return
			}
			require.NoError(t, ctx.Err(), "signal %s step %d: %v", id, i, err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	// step signals step i of id and waits until it ran: how long it took.
	step := func(id string, i int) time.Duration {
		t.Helper()
		begin := time.Now()
		signal(id, i)
		require.True(t, steps.wait(id, i+1, 90*time.Second), "%s: step %d did not run", id, i)
		return time.Since(begin)
	}
	// fresh runs a new two-step workflow to completion.
	fresh := func(name string) {
		t.Helper()
		begin := time.Now()
		id := "fresh-" + name + "-" + tq
		run := startWorkflow(id, 2)
		step(id, 0)
		step(id, 1)
		var n int
		require.NoError(t, run.Get(ctx, &n))
		assert.Equal(t, 2, n)
		t.Logf("%s: a new workflow completed in %s", name, time.Since(begin).Round(time.Millisecond))
	}

	// The workflow that lives through every fault.
	through := "through-" + tq
	run := startWorkflow(through, 6)
	t.Logf("before faults: a step takes %s", step(through, 0).Round(time.Millisecond))
	fresh("before faults")

	// 1. SIGKILL the history process that owns the workflow's shard, with
	// a workflow on every shard signalled just before, so that work is in
	// flight on the shards that move.
	owner, err := c.HistoryOwner(ctx, through)
	require.NoError(t, err)
	perShard := map[int]string{}
	for k := 0; len(perShard) < 8; k++ {
		id := fmt.Sprintf("shard-%d-%s", k, tq)
		if _, ok := perShard[c.Shard(id)]; !ok {
			perShard[c.Shard(id)] = id
		}
	}
	runs := map[string]client.WorkflowRun{}
	moving := 0
	for _, id := range perShard {
		runs[id] = startWorkflow(id, 2)
		step(id, 0)
		if o, err := c.HistoryOwner(ctx, id); err == nil && o == owner {
			moving++
		}
	}
	for id := range runs {
		signal(id, 1)
	}
	require.NoError(t, c.Kill(cluster.History, owner))
	killed := time.Now()
	t.Logf("history-%d SIGKILLed; it owned %d of the 8 shards", owner, moving)
	step(through, 1)
	t.Logf("history-%d SIGKILLed: shard takeover (a workflow on its shard %d makes progress on the other process) took %s",
		owner, c.Shard(through), time.Since(killed).Round(time.Millisecond))
	now, err := c.HistoryOwner(ctx, through)
	require.NoError(t, err)
	assert.NotEqual(t, owner, now, "shard %d still on the killed process", c.Shard(through))
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	require.NoError(t, c.WaitProgress(pctx))
	pcancel()
	t.Logf("history-%d SIGKILLed: all shards take writes %s after the kill", owner, time.Since(killed).Round(time.Millisecond))
	for id, r := range runs {
		var n int
		require.NoError(t, r.Get(ctx, &n), id)
		assert.Equal(t, 2, n, id)
	}
	t.Logf("history-%d SIGKILLed: the workflows on all 8 shards completed", owner)
	fresh("history killed")
	begin := time.Now()
	require.NoError(t, c.Restart(cluster.History, owner))
	pctx, pcancel = context.WithTimeout(ctx, time.Minute)
	require.NoError(t, c.WaitProgress(pctx))
	pcancel()
	back, err := c.HistoryShards(ctx, owner)
	require.NoError(t, err)
	t.Logf("history-%d restarted: ready, owns shards %v, and all shards take writes in %s", owner, back, time.Since(begin).Round(time.Millisecond))
	fresh("history restarted")

	// 2. Matching: killed, restarted, and the workflow's task reaches the worker.
	require.NoError(t, c.Kill(cluster.Matching, 0))
	begin = time.Now()
	signal(through, 2)
	require.NoError(t, c.Restart(cluster.Matching, 0))
	require.True(t, steps.wait(through, 3, 90*time.Second), "step 2 did not run after matching came back")
	t.Logf("matching killed and restarted: the workflow's next step ran %s after the kill", time.Since(begin).Round(time.Millisecond))
	fresh("matching restarted")

	// 3. Frontend: killed and restarted on the same address; the client reconnects.
	require.NoError(t, c.Kill(cluster.Frontend, 0))
	begin = time.Now()
	require.NoError(t, c.Restart(cluster.Frontend, 0))
	d := step(through, 3)
	t.Logf("frontend killed and restarted: the workflow's next step ran %s after the kill (%s after the signal)", time.Since(begin).Round(time.Millisecond), d.Round(time.Millisecond))
	fresh("frontend restarted")

	// 4. PostgreSQL: pg_ctl restart -m fast drops every connection.
	begin = time.Now()
	require.NoError(t, c.RestartDB())
	step(through, 4)
	t.Logf("PostgreSQL restarted: the workflow's next step ran %s after the restart began", time.Since(begin).Round(time.Millisecond))
	fresh("database restarted")

	step(through, 5)
	var n int
	require.NoError(t, run.Get(ctx, &n))
	assert.Equal(t, 6, n)
}

// dumpLogs prints the last lines of each of the cluster's logs.
func dumpLogs(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		t.Logf("%s (last lines):\n%s", e.Name(), strings.Join(lines, "\n"))
	}
}
