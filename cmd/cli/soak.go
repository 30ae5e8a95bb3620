package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tulip-temporal/tulip/cmd/soak"
	"github.com/tulip-temporal/tulip/devserver"
)

// SoakSummary is 'tulip soak --json”s summary line.
type SoakSummary = soak.Summary

const soakUsage = "usage: tulip soak [--cluster] [--workers N] [--threads T] [--runs R] [--duration D] [--baseline D] [--kill-every D] [--server-restarts K] [--pauses K] [--proxy-drops K] [--proxy-delays K] [--service-kills K] [--history-deletes K] [--continue-after-turns N] [--plain-every N] [--store dir|s3] [--s3-restarts K] [--s3-pauses K] [--s3-slow-downs K] [--codec-key-file FILE] [--inject dedup-off|served-but-ran|no-thread-store|no-cas] [--upgrade-at D [--unversioned]] [--json]"

func (e *env) soak(args []string) error {
	fs := e.flags("soak")
	o := soak.Options{Progress: e.stderr, Log: e.stderr}
	fs.StringVar(&o.Address, "address", "", "a Temporal frontend to soak (no server faults; default: the soak's own server)")
	fs.BoolVar(&o.Cluster, "cluster", false, "soak a multi-process cluster on PostgreSQL (devserver/cluster) instead of the embedded server")
	fs.IntVar(&o.Workers, "workers", 3, "worker OS processes on one task queue")
	fs.IntVar(&o.CacheSize, "cache-size", 2, "each worker's sticky cache size (small: runs are evicted and replayed)")
	fs.IntVar(&o.Threads, "threads", 6, "threads the runs are spread over")
	fs.IntVar(&o.Runs, "runs", 0, "stop starting runs after this many in each phase (0: only --duration bounds them)")
	fs.DurationVar(&o.Duration, "duration", 2*time.Minute, "start runs with faults for this long, then check")
	fs.DurationVar(&o.Baseline, "baseline", 0, "start runs without faults for this long first (0: as long as --duration; negative: one run per thread)")
	fs.DurationVar(&o.KillEvery, "kill-every", 5*time.Second, "SIGKILL a random worker process this often, and start a new one (negative: never)")
	fs.IntVar(&o.ServerRestarts, "server-restarts", 1, "stop the embedded server and start it again on the same database this many times")
	fs.IntVar(&o.Pauses, "pauses", 1, "SIGSTOP the server process (with --cluster: a history process) for --pause-for, then SIGCONT it, this many times")
	fs.DurationVar(&o.PauseFor, "pause-for", 3*time.Second, "how long a pause or a proxy delay lasts")
	fs.IntVar(&o.ProxyDrops, "proxy-drops", 2, "drop every connection between the workers and the server this many times")
	fs.IntVar(&o.ProxyDelays, "proxy-delays", 1, "delay the workers' traffic by --proxy-delay for --pause-for this many times")
	fs.DurationVar(&o.ProxyDelay, "proxy-delay", 300*time.Millisecond, "the delay a proxy delay adds to each chunk")
	fs.IntVar(&o.ServiceKills, "service-kills", 4, "with --cluster: SIGKILL a history, matching or frontend process, or restart PostgreSQL, this many times in turn")
	fs.DurationVar(&o.Retention, "retention", devserver.DefaultRetention, "the namespace's retention on the server the soak starts (embedded or --cluster)")
	fs.IntVar(&o.HistoryDeletes, "history-deletes", 0, "delete the closed histories of a random thread's finished runs this many times, as a namespace's retention would (the workers keep threads in a thread store)")
	fs.IntVar(&o.ContinueAfterTurns, "continue-after-turns", 0, "runs continue as new after this many turns (0: the library's default)")
	fs.IntVar(&o.PlainEvery, "plain-every", 3, "every Nth thread's runs start plainly (ExecuteWorkflow with thread, model and message only; 0: none)")
	fs.DurationVar(&o.ModelLatency, "model-latency", 200*time.Millisecond, "how long the workers' scripted model takes to answer")
	fs.StringVar(&o.Store, "store", "dir", "where the workers keep threads: dir (a directory they share) or s3 (an S3 server the soak starts, behind a fault proxy; each worker process gets a private home and temp directory)")
	fs.IntVar(&o.S3Restarts, "s3-restarts", 0, "with --store s3: restart the S3 server's gateway this many times")
	fs.IntVar(&o.S3Pauses, "s3-pauses", 0, "with --store s3: SIGSTOP the S3 server's gateway for --pause-for this many times")
	fs.IntVar(&o.S3SlowDowns, "s3-slow-downs", 0, "with --store s3: the proxy answers every S3 request 503 SlowDown for --pause-for this many times")
	e.codecFlag(fs, &o.CodecKeyFile)
	fs.StringVar(&o.OnUnknown, "on-unknown", "", "issue_refund's OnUnknown in the workers: check (a lost attempt is a question to billing, by key), hold (the run waits; the soak answers from billing's lookup by key, as a person would) or empty (Temporal retries it)")
	fs.Float64Var(&o.EffectKills, "effect-kills", 0, "the chance (0 to 1) that a worker SIGKILLs itself inside issue_refund after billing answered, on a call's first attempt")
	fs.StringVar(&o.Inject, "inject", "", "break the workers on purpose, a control the checker must catch: dedup-off, served-but-ran, no-thread-store (with --history-deletes), or no-cas (with --store s3: thread saves without their conditional writes)")
	fs.DurationVar(&o.UpgradeAt, "upgrade-at", 0, "the upgrade drill: this long into the fault phase, deploy v2 of the agent (a changed prompt, a new tool, a removed one, a workflow change v1's runs cannot replay) on a Worker Deployment: v2 made current, v1's runs drain (0: no upgrade)")
	fs.BoolVar(&o.Unversioned, "unversioned", false, "the upgrade drill's control: no Worker Deployment, v2's workers replace v1's in a rolling restart (the checker must fail it)")
	fs.DurationVar(&o.StuckAfter, "stuck-after", 5*time.Minute, "a run still open this long after its phase's last start is stuck")
	asJSON := fs.Bool("json", false, "print the summary as one JSON line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.CodecKeyFile == "" {
		o.CodecKeyFile = e.getenv("TULIP_CODEC_KEY_FILE")
	}
	if !o.Cluster {
		o.ServiceKills = 0
	} else {
		o.ServerRestarts = 0
	}
	if o.Address != "" {
		o.ServerRestarts, o.Pauses = 0, 0
	}
	o.LogLevel = strings.ToLower(e.logLevel(slog.LevelError).String())
	sum, err := soak.Run(e.ctx, o)
	if err != nil {
		if ue, ok := err.(*soak.UsageError); ok {
			return usageError{ue.Error() + "; " + soakUsage}
		}
		return err
	}
	e.printSoak(sum, *asJSON)
	if sum.ViolationCount > 0 {
		for _, v := range sum.Violations {
			fmt.Fprintln(e.stderr, "tulip: soak: "+v)
		}
		return exitCode(1)
	}
	return nil
}

// soakWorker is the hidden 'tulip soak-worker' command: one worker process
// of a soak, until it is killed.
func (e *env) soakWorker(args []string) error {
	fs := e.flags("soak-worker")
	o := soak.WorkerOptions{Ready: e.stdout, Log: e.stderr}
	fs.StringVar(&o.Address, "address", "", "")
	fs.StringVar(&o.Namespace, "namespace", "default", "")
	fs.StringVar(&o.TaskQueue, "task-queue", "", "")
	fs.IntVar(&o.CacheSize, "cache-size", 2, "")
	fs.StringVar(&o.Billing, "billing", "", "")
	fs.StringVar(&o.Pager, "pager", "", "")
	fs.StringVar(&o.CodecKeyFile, "codec-key-file", "", "")
	fs.StringVar(&o.Attempts, "attempts", "", "")
	fs.StringVar(&o.Inject, "inject", "", "")
	fs.StringVar(&o.OnUnknown, "on-unknown", "", "")
	fs.Float64Var(&o.EffectKills, "effect-kills", 0, "")
	fs.StringVar(&o.ThreadDir, "thread-dir", "", "")
	fs.StringVar(&o.ThreadStore, "thread-store", "", "")
	fs.DurationVar(&o.ModelLatency, "model-latency", 0, "")
	fs.StringVar(&o.Deployment, "deployment", "", "")
	fs.StringVar(&o.BuildID, "build-id", "", "")
	fs.BoolVar(&o.V2, "v2", false, "")
	level := fs.String("log-level", "error", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	_ = o.Level.UnmarshalText([]byte(*level))
	return soak.RunWorker(e.ctx, o)
}

// soakServer is the hidden 'tulip soak-server' command: the embedded
// server of a soak in its own process (so that it can be paused), until
// SIGTERM.
func (e *env) soakServer(args []string) error {
	fs := e.flags("soak-server")
	o := soak.ServerOptions{Ready: e.stdout, Log: e.stderr}
	fs.StringVar(&o.DBFile, "db", "", "")
	fs.IntVar(&o.Port, "port", 0, "")
	fs.DurationVar(&o.Retention, "retention", 0, "")
	level := fs.String("log-level", "error", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	_ = o.Level.UnmarshalText([]byte(*level))
	return soak.RunServer(e.ctx, o)
}

func (e *env) printSoak(sum SoakSummary, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(e.stdout, string(b))
		return
	}
	kinds := make([]string, 0, len(sum.Faults))
	for k, n := range sum.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "server\t%s\n", sum.Server)
	fmt.Fprintf(tw, "runs\t%d (completed %d, failed %d, stuck %d)\n", sum.Runs, sum.Completed, sum.Failed, sum.Stuck)
	fmt.Fprintf(tw, "faults\t%s\n", strings.Join(kinds, ", "))
	fmt.Fprintf(tw, "witnesses\t%d requests (%d retried with their key), %d refunds for %d keys, %d pages\n",
		sum.WitnessRequests, sum.RetriedRequests, sum.Refunds, sum.DistinctKeys, sum.Pages)
	fmt.Fprintf(tw, "duplicate side effects\t%d\n", sum.Duplicates)
	fmt.Fprintf(tw, "thread store\t%s (%d threads holding an older run's state; %d S3 requests refused)\n", sum.Store, sum.StaleThreads, sum.S3Refused)
	fmt.Fprintf(tw, "histories replayed\t%d\n", sum.ReplayedHistories)
	if sum.UpgradedAtS > 0 {
		fmt.Fprintf(tw, "upgrade\tv2 took new runs at %.0f s; histories by build %v; %d runs could not replay, %d workflow tasks failed on nondeterminism\n",
			sum.UpgradedAtS, sum.Builds, sum.Nondeterministic, sum.NondeterminismFailures)
	}
	fmt.Fprintf(tw, "recovery after a worker kill\tp50 %.1f s, p99 %.1f s, max %.1f s (%d calls in flight; %d never retried)\n",
		sum.RecoveryP50S, sum.RecoveryP99S, sum.RecoveryMaxS, sum.RecoverySamples, sum.Unrecovered)
	fmt.Fprintf(tw, "throughput\t%.1f turns/s with faults (%d turns), %.1f fault-free (%d turns; %.2fx)\n",
		sum.TurnsPerS, sum.Turns, sum.BaselineTurnsPerS, sum.BaselineTurns, sum.ThroughputRatio)
	fmt.Fprintf(tw, "elapsed\t%.0f s (checking %.0f s), %d worker processes\n", sum.ElapsedS, sum.CheckS, sum.WorkerProcessesRan)
	fmt.Fprintf(tw, "violations\t%d\n", sum.ViolationCount)
	tw.Flush()
}
