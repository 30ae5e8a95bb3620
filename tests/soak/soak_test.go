package soak

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/devserver/cluster"
	"github.com/tulip-temporal/tulip/s3store/s3test"
)

var (
	soakBinOnce sync.Once
	soakBin     string
	soakBinErr  error
	soakBinDir  string
)

// tulipBinary builds the tulip binary once for the soak tests.
func tulipBinary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("SIGKILL, SIGSTOP and process groups: Linux only")
	}
	soakBinOnce.Do(func() {
		soakBinDir, soakBinErr = os.MkdirTemp("", "tulip-soak-bin-")
		if soakBinErr != nil {
			return
		}
		soakBin = filepath.Join(soakBinDir, "tulip")
		var out []byte
		out, soakBinErr = exec.Command("go", "build", "-o", soakBin, "github.com/tulip-temporal/tulip/cmd/tulip").CombinedOutput()
		if soakBinErr != nil {
			soakBinErr = &buildError{out: string(out), err: soakBinErr}
		}
	})
	require.NoError(t, soakBinErr)
	return soakBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// runSoak runs `tulip soak ARGS --json` and returns its summary, its stderr
// and its exit code.
func runSoak(t *testing.T, args ...string) (cli.SoakSummary, string, int) {
	t.Helper()
	cmd := exec.Command(tulipBinary(t), append(append([]string{"soak"}, args...), "--json")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	t.Logf("soak (%s, exit %d): %s", time.Since(start).Round(time.Second), code, strings.TrimSpace(stdout.String()))
	var sum cli.SoakSummary
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &sum), "one JSON line: %s\n%s", stdout.String(), tail(stderr.String()))
	return sum, stderr.String(), code
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// TestSoakShort runs `tulip soak` with every fault kind of the embedded
// server for 30 s after a 10 s fault-free baseline: 3 worker processes
// with a sticky cache of 2, 6 threads (every third started plainly), runs
// continuing as new every 2 turns, payloads encrypted; a worker SIGKILLed
// every 3 s, a server restart, a server pause, a proxy drop and delay, two
// history deletes (a thread's finished runs deleted, as retention would). The
// checker: runs against the same runs played alone, the services'
// witnesses, every history replayed. Nothing fires twice, nothing is stuck.
// The bounds asserted are counts (every thread plays at least one run in
// each phase; the scheduled faults are all injected), not times.
func TestSoakShort(t *testing.T) {
	bin := tulipBinary(t)
	keys := filepath.Join(t.TempDir(), "keys")
	out, err := exec.Command(bin, "keygen", "soak-1").Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keys, out, 0o600))

	sum, stderr, code := runSoak(t, "--workers", "3", "--cache-size", "2", "--threads", "6", "--duration", "30s", "--baseline", "10s",
		"--kill-every", "3s", "--server-restarts", "1", "--pauses", "1", "--proxy-drops", "1", "--proxy-delays", "1",
		"--continue-after-turns", "2", "--plain-every", "3", "--history-deletes", "2", "--codec-key-file", keys)
	if code != 0 {
		t.Log(tail(stderr))
	}
	require.Zero(t, code)
	assert.Zero(t, sum.Duplicates)
	assert.Zero(t, sum.Stuck)
	assert.Zero(t, sum.Failed)
	assert.Zero(t, sum.ViolationCount)
	assert.Equal(t, sum.Runs, sum.Completed)
	assert.GreaterOrEqual(t, sum.Runs, 12)
	assert.GreaterOrEqual(t, sum.Faults["worker_kill"], 3)
	for _, kind := range []string{"server_restart", "server_pause", "proxy_drop", "proxy_delay"} {
		assert.Equal(t, 1, sum.Faults[kind], kind)
	}
	assert.Equal(t, 2, sum.Faults["history_delete"])
	assert.Greater(t, sum.DeletedRuns, 0, "threads went on after their runs' histories were deleted")
	assert.Equal(t, 6, sum.DistinctKeys)
	assert.Equal(t, sum.DistinctKeys, sum.Refunds)
	assert.GreaterOrEqual(t, sum.WitnessRequests, sum.Refunds+sum.Pages)
	assert.Greater(t, sum.ReplayedHistories, sum.Runs, "runs continue as new: more histories than runs")
	assert.Greater(t, sum.BaselineTurnsPerS, 0.0)
	assert.Greater(t, sum.TurnsPerS, 0.0)
	assert.Zero(t, sum.Unrecovered, "every activity in flight on a killed worker was retried")
}

// TestSoakControls: the checker catches a worker that serves nothing
// (dedup-off: the log comparison sees it) and one that runs the body of a
// call it served (served-but-ran: only the witnesses see it). Each exits
// 1, names a run and a call, and counts duplicates.
func TestSoakControls(t *testing.T) {
	tulipBinary(t)
	for _, inject := range []string{"dedup-off", "served-but-ran", "no-thread-store"} {
		t.Run(inject, func(t *testing.T) {
			t.Parallel()
			deletes := "0"
			if inject == "no-thread-store" {
				deletes = "3" // the workers keep no thread store while runs are deleted
			}
			sum, stderr, code := runSoak(t, "--inject", inject, "--workers", "2", "--threads", "2", "--duration", "10s", "--baseline=-1s",
				"--kill-every=-1s", "--server-restarts", "0", "--pauses", "0", "--proxy-drops", "0", "--proxy-delays", "0", "--model-latency", "0",
				"--history-deletes", deletes)
			assert.Equal(t, 1, code)
			assert.Greater(t, sum.Duplicates, 0)
			assert.Zero(t, sum.Stuck)
			line := regexp.MustCompile(`tulip: soak: run t\d+k\d+ call t\d+k\d+-[a-h]: [a-z_]+: .*`).FindString(stderr)
			require.NotEmpty(t, line, "a violation naming a run and a call: %s", tail(stderr))
			t.Logf("%s", line)
			if inject == "served-but-ran" {
				assert.Contains(t, stderr, "served_reached_service")
				assert.NotContains(t, stderr, ": log: ", "the logs are right: only the witnesses see it")
			}
		})
	}
}

// Workers SIGKILL themselves inside issue_refund after billing made the
// refund and before the result (every call's first attempt). With the
// tool on OnUnknown "check", each lost refund is a question to billing,
// by key; on "hold", the run waits and the soak answers from billing's
// lookup, as a person would. Either way no refund request repeats its key
// (a service that ignored keys would have refunded once), and the checker
// finds nothing. A call whose attempt was lost before it sent its request
// (its worker killed by another thread's refund) and whose thread had made
// the refund before is resolved from billing's record of its key: its
// witness is that earlier request (resolved_by_key; rare at this size:
// one full CI run in eight met it). The control, the tool on retry:
// Temporal runs the lost attempts again, and billing sees their keys twice
// (a service that ignored keys would have refunded twice).
func TestSoakUnknownOutcomes(t *testing.T) {
	tulipBinary(t)
	for _, mode := range []string{"check", "hold", "retry"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			args := []string{"--effect-kills", "1", "--workers", "2", "--threads", "3", "--duration", "10s", "--baseline=-1s",
				"--kill-every=-1s", "--server-restarts", "0", "--pauses", "0", "--proxy-drops", "0", "--proxy-delays", "0",
				"--model-latency", "0", "--history-deletes", "0", "--plain-every", "0"}
			if mode != "retry" {
				args = append(args, "--on-unknown", mode)
			}
			sum, stderr, code := runSoak(t, args...)
			if code != 0 {
				t.Log(tail(stderr))
			}
			require.Zero(t, code)
			assert.Zero(t, sum.Duplicates)
			assert.Zero(t, sum.Stuck)
			assert.Equal(t, sum.Runs, sum.Completed)
			assert.GreaterOrEqual(t, sum.EffectKills, 3, "every thread's first refund killed its worker")
			assert.Equal(t, 3, sum.Refunds, "billing honours keys: one refund per thread either way")
			if mode != "retry" {
				assert.Zero(t, sum.RefundsRetried, "no lost refund reached billing again")
			} else {
				assert.GreaterOrEqual(t, sum.RefundsRetried, sum.EffectKills, "each lost refund reached billing again, with its key")
			}
			t.Logf("%s: %d effect kills, %d refund requests repeated at billing, %d calls resolved by an earlier request's key, %d runs",
				mode, sum.EffectKills, sum.RefundsRetried, sum.ResolvedByKey, sum.Runs)
		})
	}
}

// TestSoakCluster runs `tulip soak --cluster` for 40 s after a 10 s
// baseline: PostgreSQL, frontend, 2 history, matching and worker processes;
// a worker SIGKILLed every 8 s, and a history, a matching and a frontend
// process SIGKILLed and restarted and PostgreSQL restarted in turn, a proxy
// drop. Nothing fires twice, nothing is stuck.
func TestSoakCluster(t *testing.T) {
	if _, err := cluster.FindPostgres(""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (.ci/run installs it with scripts/install-test-deps)", err)
		}
		t.Skipf("%v", err)
	}
	sum, stderr, code := runSoak(t, "--cluster", "--workers", "2", "--threads", "4", "--duration", "40s", "--baseline", "10s",
		"--kill-every", "8s", "--service-kills", "4", "--pauses", "0", "--proxy-drops", "1", "--proxy-delays", "0", "--plain-every", "0")
	if code != 0 {
		t.Log(tail(stderr))
	}
	require.Zero(t, code)
	assert.Equal(t, "cluster", sum.Server)
	assert.Zero(t, sum.Duplicates)
	assert.Zero(t, sum.Stuck)
	assert.Zero(t, sum.ViolationCount)
	for _, kind := range []string{"history_kill", "matching_kill", "frontend_kill", "db_restart"} {
		assert.Equal(t, 1, sum.Faults[kind], kind)
	}
	assert.GreaterOrEqual(t, sum.Faults["worker_kill"], 3)
	assert.GreaterOrEqual(t, sum.Runs, 8)
}

// TestSoakS3 runs `tulip soak --store s3`: worker processes with private
// homes that share only the Temporal server and an S3 bucket (SeaweedFS,
// behind a fault proxy), half their thread saves made again 6 s late as
// an attempt that outlived its timeout would, threads' runs deleted from
// history so that a thread goes on from the bucket alone, the S3 gateway
// restarted, paused and answering 503 SlowDown. Nothing fires twice,
// nothing is lost, and no thread's stored state is an older run's. The
// control (no-cas: writes sent without their conditions) must fail: the
// late saves then win and a thread's next run lacks its last run's log.
func TestSoakS3(t *testing.T) {
	tulipBinary(t)
	if _, err := s3test.Binary(); err != nil { // skips (or fails on CI) without weed, as the other S3 tests
		if os.Getenv("CI") == "true" || os.Getenv(s3test.EnvBinary) != "" {
			t.Fatalf("%v (the S3 tests may not be skipped)", err)
		}
		t.Skip(err)
	}
	base := []string{"--store", "s3", "--workers", "2", "--duration", "25s", "--baseline=-1s",
		"--server-restarts", "0", "--pauses", "0", "--proxy-drops", "0", "--proxy-delays", "0", "--model-latency", "0"}
	t.Run("faults", func(t *testing.T) {
		t.Parallel()
		sum, stderr, code := runSoak(t, append(base, "--threads", "3", "--history-deletes", "3",
			"--kill-every", "8s", "--s3-restarts", "1", "--s3-pauses", "1", "--s3-slow-downs", "1")...)
		if code != 0 {
			t.Log(tail(stderr))
		}
		require.Zero(t, code)
		assert.Equal(t, "s3", sum.Store)
		assert.Zero(t, sum.Duplicates)
		assert.Zero(t, sum.Stuck)
		assert.Zero(t, sum.Failed)
		assert.Zero(t, sum.StaleThreads)
		assert.Zero(t, sum.ViolationCount)
		assert.Equal(t, sum.Runs, sum.Completed)
		assert.Greater(t, sum.DeletedRuns, 0, "threads went on from the bucket after their runs' histories were deleted")
		for _, kind := range []string{"s3_restart", "s3_pause", "s3_slow_down"} {
			assert.Equal(t, 1, sum.Faults[kind], kind)
		}
		assert.Greater(t, sum.S3Refused, int64(0), "the proxy refused requests while slowing down")
	})
	t.Run("no-cas", func(t *testing.T) {
		t.Parallel()
		// Two threads, eight deletes: each thread goes on from the bucket
		// alone several times (in three trials alone, 62 to 111 runs
		// deleted and 102 to 153 violations).
		sum, stderr, code := runSoak(t, append(base, "--threads", "2", "--history-deletes", "8", "--inject", "no-cas", "--kill-every=-1s")...)
		assert.Equal(t, 1, code)
		assert.Greater(t, sum.ViolationCount, 0)
		line := regexp.MustCompile(`tulip: soak: run t\d+k\d+ call t\d+k\d+-[a-h]: log: .*`).FindString(stderr)
		require.NotEmpty(t, line, "a thread's run lacks its last run's log: %s", tail(stderr))
		t.Logf("%s; %d threads left with an older run's state", line, sum.StaleThreads)
	})
}

// The upgrade drill: 12 s into the fault phase, v2 of the agent (a
// changed prompt, a tool more, a tool fewer, and a workflow change v1's
// runs cannot replay) is deployed on the soak's Worker Deployment and made
// current, while workers are killed every 4 s. v1's open runs drain on v1
// (each history ends on the build it started on), runs started after the
// switch are v2's, nothing fires twice, nothing is stuck, and no workflow
// task fails on nondeterminism. The control deploys the same v2 without
// versioning, as a rolling restart: v1's open runs meet v2, and the
// checker fails it (runs that cannot replay, a typed
// tulip.Nondeterminism where the server recorded the cause).
func TestSoakUpgrade(t *testing.T) {
	tulipBinary(t)
	common := []string{"--workers", "2", "--threads", "4", "--duration", "30s", "--baseline=-1s", "--upgrade-at", "12s",
		"--server-restarts", "0", "--pauses", "0", "--proxy-delays", "0", "--stuck-after", "90s"}
	t.Run("versioned", func(t *testing.T) {
		t.Parallel()
		sum, stderr, code := runSoak(t, append(common, "--kill-every", "4s", "--proxy-drops", "1")...)
		if code != 0 {
			t.Log(tail(stderr))
		}
		require.Zero(t, code)
		assert.Zero(t, sum.Duplicates)
		assert.Zero(t, sum.Stuck)
		assert.Zero(t, sum.Failed)
		assert.Zero(t, sum.Nondeterministic)
		assert.Zero(t, sum.NondeterminismFailures)
		assert.Zero(t, sum.ReplayFailures)
		assert.Equal(t, sum.Runs, sum.Completed)
		assert.Greater(t, sum.UpgradedAtS, 0.0)
		assert.Greater(t, sum.Builds["v1"], 0, "runs on v1")
		assert.Greater(t, sum.Builds["v2"], 0, "runs on v2 after the switch")
		assert.GreaterOrEqual(t, sum.Faults["worker_kill"], 3)
		assert.Equal(t, sum.DistinctKeys, sum.Refunds)
	})
	t.Run("unversioned", func(t *testing.T) {
		t.Parallel()
		sum, stderr, code := runSoak(t, append(common, "--unversioned", "--kill-every=-1s", "--proxy-drops", "0", "--plain-every", "0")...)
		assert.Equal(t, 1, code, "the checker fails a rolling restart with an incompatible change")
		assert.Greater(t, sum.Stuck+sum.Nondeterministic+sum.NondeterminismFailures+sum.ReplayFailures, 0)
		for _, v := range sum.Violations {
			t.Log(v)
		}
		t.Logf("stuck %d, nondeterministic %d, nondeterminism failures %d, replay failures %d", sum.Stuck, sum.Nondeterministic,
			sum.NondeterminismFailures, sum.ReplayFailures)
		require.NotEmpty(t, regexp.MustCompile(`tulip: soak: run t\d+k\d+ .*(nondeterminism|does not replay|cannot go on|stuck)`).FindString(stderr), tail(stderr))
	})
}
