package tests

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// crashTrials is the number of trials per crash point.
const crashTrials = 20

var (
	buildOnce   sync.Once
	workerBin   string
	buildErr    error
	buildOutput []byte
)

// crashWorker builds ./crashworker once per test binary.
func crashWorker(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tulip-crashworker")
		if err != nil {
			buildErr = err
			return
		}
		workerBin = filepath.Join(dir, "crashworker")
		cmd := exec.Command("go", "build", "-o", workerBin, "./crashworker")
		buildOutput, buildErr = cmd.CombinedOutput()
	})
	require.NoError(t, buildErr, "%s", buildOutput)
	return workerBin
}

// startProcess starts a crash worker process and waits until it polls.
func startProcess(t *testing.T, bin, tq, billingURL, crashAt, marker string) *exec.Cmd {
	t.Helper()
	args := []string{"-address", server.Address(), "-task-queue", tq, "-billing", billingURL}
	if crashAt != "" {
		args = append(args, "-crash-at", crashAt, "-marker", marker)
	}
	return startWorkerProcess(t, bin, args...)
}

// startWorkerProcess starts a crash worker with args and waits until it
// polls.
func startWorkerProcess(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "worker process did not start")
	require.Equal(t, "ready\n", line)
	return cmd
}

// TestCrashWindow kills a real worker process with SIGKILL at each point of
// the external-success crash window, then lets a new worker process take
// over. Billing must make exactly one refund per run, the run must
// complete, and its log must hold one executed record with billing's
// original receipt.
func TestCrashWindow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGKILL of a child process: Linux only")
	}
	bin := crashWorker(t)
	for _, point := range []string{"before-billing", "after-billing", "after-completion"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			bill, err := billing.Start()
			require.NoError(t, err)
			defer bill.Close()
			c := dial(t, server.Address())
			tq := taskQueue("crash-" + point)
			start := time.Now()
			for i := range crashTrials {
				crashTrial(t, c, bin, tq, bill, point, i)
			}
			refunds := bill.Refunds()
			assert.Len(t, refunds, crashTrials, "one refund per trial at billing")
			t.Logf("%s: %d trials, %d refunds at billing, %s", point, crashTrials, len(refunds), time.Since(start).Round(time.Second))
		})
	}
}

// awaitKilled waits for a crash worker to kill itself with SIGKILL (at
// the point its flags chose; what names it), for up to a minute.
func awaitKilled(t *testing.T, cmd *exec.Cmd, what string) {
	t.Helper()
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "worker exited with %v", err)
		ws, ok := exit.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "worker exited with %v, not SIGKILL", err)
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%s: the worker never reached its crash point", what)
	}
}

func crashTrial(t *testing.T, c client.Client, bin, tq string, bill *billing.Server, point string, i int) {
	t.Helper()
	order := fmt.Sprintf("ord-%s-%d", point, i)
	marker := filepath.Join(t.TempDir(), "crashed")
	first := startProcess(t, bin, tq, bill.URL(), point, marker)
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "refund", Message: order,
		ThreadID: fmt.Sprintf("%s-%d", tq, i), WorkflowTaskTimeout: 2 * time.Second})
	require.NoError(t, err)

	// The first process must die of SIGKILL, at the chosen point.
	awaitKilled(t, first, fmt.Sprintf("trial %d: %s", i, point))
	_, err = os.Stat(marker)
	require.NoError(t, err, "crashed at the chosen point")

	second := startProcess(t, bin, tq, bill.URL(), "", "")
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()
	res, err := runclient.Await(ctxT(t), c, h, "")
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status, "trial %d", i)

	var made []billing.Receipt
	for _, r := range bill.Refunds() {
		if r.OrderID == order {
			made = append(made, r)
		}
	}
	require.Len(t, made, 1, "trial %d: refunds at billing for %s", i, order)
	// The key billing saw is the stable one, at every crash point: a key
	// that changed per attempt would show here even where the crash came
	// before billing or after the activity completed.
	assert.Equal(t, "refund:"+order+":120:v1", bill.KeyOf(made[0].RefundID), "trial %d: the key billing got", i)
	recs, err := runclient.Log(ctxT(t), c, h)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, dedup.Executed, recs[0].Origin)
	var rc billing.Receipt
	require.NoError(t, json.Unmarshal(recs[0].Result, &rc))
	assert.Equal(t, made[0].RefundID, rc.RefundID, "the log holds billing's original receipt")
	assert.Equal(t, "refund:"+order+":120:v1", recs[0].Key)
}

// Two agents in one thread each call issue_refund(o, a): each fires its
// body once (the per-agent boundary), and billing makes one refund (the
// business key).
func TestTwoAgentsOneRefund(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	thread := "two-agents-" + taskQueue("t")
	var receipts []string
	for _, name := range []string{"triage", "billing"} {
		run := scenario.Run{Turns: []scenario.Turn{turn(call("c-"+name, "issue_refund", refund))}}
		_, res := runScript(t, c, tb, run, runclient.RunOptions{ThreadID: thread, Agent: name})
		require.Equal(t, agentrun.OutcomeExecuted, res.Trace[0].Outcome, name)
		var out billing.Receipt
		require.NoError(t, json.Unmarshal(res.Trace[0].Result, &out))
		receipts = append(receipts, out.RefundID)
	}
	assert.Equal(t, 2, tb.Invocations()["issue_refund"], "each agent fires its body once")
	assert.Len(t, bill.Refunds(), 1, "billing makes one refund")
	assert.Equal(t, receipts[0], receipts[1], "both agents hold the original receipt")
}

var _ = workerplugin.Options{}
