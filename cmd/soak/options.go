package soak

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// Options configure Run. Every zero value is documented; Run fills them in.
type Options struct {
	// Binary is the tulip binary that hosts the worker, server and cluster
	// service processes (its hidden soak-worker, soak-server and
	// cluster-service commands). Zero value: os.Executable().
	Binary string
	// Address is a Temporal frontend to soak instead of a server of the
	// soak's own: no server faults then. Zero value: the soak starts one.
	Address string
	// Namespace on Address. Zero value: "default".
	Namespace string
	// Cluster runs the soak on a devserver/cluster cluster (PostgreSQL and
	// each service in its own process). Zero value: the embedded server in
	// its own process on a file database.
	Cluster bool
	// Workers is how many worker OS processes poll the soak's task queue.
	// Zero value: 3.
	Workers int
	// CacheSize is each worker's sticky cache size (small: runs are evicted
	// and replayed). Zero value: 2.
	CacheSize int
	// Threads is how many threads the runs are spread over (one open run
	// per thread). Zero value: 6.
	Threads int
	// Runs stops starting runs after this many in the fault phase. Zero
	// value: only Duration bounds them.
	Runs int
	// Duration is how long runs start in the fault phase. Zero value: 2m.
	Duration time.Duration
	// Baseline is how long runs start in the fault-free phase before it,
	// with the same workers and threads. Zero value: Duration (a fair
	// baseline). Negative: one run per thread.
	Baseline time.Duration
	// KillEvery SIGKILLs a random worker process this often (a new one
	// takes its place). Zero value: 5s. Negative: never.
	KillEvery time.Duration
	// ServerRestarts stops the embedded server and starts it again on the
	// same database this many times. Zero value: none.
	ServerRestarts int
	// Pauses SIGSTOPs the server process (on a cluster: a history
	// process) for PauseFor, then SIGCONTs it, this many times. Zero value:
	// none.
	Pauses int
	// PauseFor is how long a pause lasts. Zero value: 3s.
	PauseFor time.Duration
	// ProxyDrops closes every connection between the workers and the
	// server this many times. Zero value: none.
	ProxyDrops int
	// ProxyDelays delays everything the proxy forwards by ProxyDelay for
	// PauseFor this many times. Zero value: none.
	ProxyDelays int
	// ProxyDelay is the delay. Zero value: 300ms.
	ProxyDelay time.Duration
	// Retention is the namespace's retention on the server the soak
	// starts (embedded or cluster). Zero value: devserver.DefaultRetention.
	Retention time.Duration
	// HistoryDeletes deletes, this many times, the closed histories of a
	// random thread's finished runs, as a namespace's retention would
	// (the workers keep their threads in a thread store). Zero value: none.
	HistoryDeletes int
	// ServiceKills, on a cluster, kills a history, matching or frontend
	// process, or restarts PostgreSQL, this many times in turn. Zero value:
	// none.
	ServiceKills int
	// ContinueAfterTurns continues runs as new after this many turns. Zero
	// value: the library's default (250: soak runs never continue).
	ContinueAfterTurns int
	// PlainEvery starts every PlainEvery-th thread's runs the plain way: a
	// raw ExecuteWorkflow with only thread, model and message. Zero value:
	// none.
	PlainEvery int
	// ModelLatency is how long the workers' model takes to answer (the
	// reference's answers at once). Zero value: no wait.
	ModelLatency time.Duration
	// CodecKeyFile encrypts every payload with these keys, in the workers,
	// the reference runs and the replays. Zero value: none.
	CodecKeyFile string
	// Store is where the workers keep threads: "dir" (a directory they
	// share on this machine) or "s3" (a SeaweedFS S3 server the soak
	// starts, behind a fault proxy: each worker process then has a
	// private home and temp directory, and shares only the Temporal
	// server and the bucket; half its saves are made again late, as
	// attempts that outlived their timeout would). Zero value: "dir".
	Store string
	// S3Restarts, S3Pauses and S3SlowDowns, with Store "s3": restart the
	// S3 server's gateway, SIGSTOP it for PauseFor, or have the proxy
	// answer every request 503 SlowDown for PauseFor (until it has refused
	// one, for at most three times PauseFor), this many times
	// each. Zero value: none.
	S3Restarts, S3Pauses, S3SlowDowns int
	// OnUnknown is issue_refund's ToolSpec.OnUnknown in the workers: ""
	// (Temporal retries a lost attempt), "check" (the run asks billing by
	// key) or "hold" (the run waits for an answer: the workload looks the
	// key up at billing, as a person would, and answers with the receipt,
	// or approves a run again with the key when billing has none). Zero
	// value: "".
	OnUnknown string
	// EffectKills is the chance (0 to 1) that a worker SIGKILLs itself
	// inside issue_refund's body after billing answered and before the
	// result, on a call's first attempt (a new worker takes its place).
	// Zero value: never.
	EffectKills float64
	// Inject breaks the workers on purpose, a control the checker must
	// catch: "dedup-off", "served-but-ran", "no-thread-store" or, with
	// Store "s3", "no-cas" (writes without their conditions). Zero value:
	// none.
	Inject string
	// UpgradeAt runs the upgrade drill (upgrade.go): this long into the
	// fault phase, v2 of the agent (a changed prompt, one tool more, one
	// fewer, and a workflow change v1's runs cannot replay) is deployed.
	// The workers are on a Worker Deployment: v2's start, v2 is made
	// current, v1's drain. Zero value: no upgrade.
	UpgradeAt time.Duration
	// Unversioned is the drill's control: no Worker Deployment, and v2's
	// workers replace v1's in a rolling restart (v1's open runs meet v2).
	// The checker must fail it. Zero value: versioned.
	Unversioned bool
	// StuckAfter is how long after a phase's last start its runs may
	// take to end; a run still open then is stuck. Zero value: 5m.
	StuckAfter time.Duration
	// Progress receives progress lines. Zero value: none.
	Progress io.Writer
	// Log receives the worker, server and SDK logs. Zero value: none.
	Log io.Writer
	// LogLevel is the processes' log level ("error", "warn", ...). Zero
	// value: "error".
	LogLevel string
}

// Injections are Options.Inject's values.
var Injections = []string{"dedup-off", "served-but-ran", "no-thread-store", "no-cas"}

// UsageError is Options that cannot run.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return "soak: " + e.Msg }

func (o *Options) fill() error {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.Workers, 3)
	def(&o.CacheSize, 2)
	def(&o.Threads, 6)
	if o.Duration == 0 {
		o.Duration = 2 * time.Minute
	}
	if o.Baseline == 0 {
		o.Baseline = o.Duration
	}
	if o.KillEvery == 0 {
		o.KillEvery = 5 * time.Second
	}
	if o.Retention == 0 {
		o.Retention = devserver.DefaultRetention
	}
	if o.StuckAfter == 0 {
		o.StuckAfter = 5 * time.Minute
	}
	if o.PauseFor == 0 {
		o.PauseFor = 3 * time.Second
	}
	if o.ProxyDelay == 0 {
		o.ProxyDelay = 300 * time.Millisecond
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.LogLevel == "" {
		o.LogLevel = "error"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	switch {
	case o.Workers < 1 || o.Threads < 1 || o.Runs < 0 || o.Duration < 0:
		return &UsageError{"workers and threads must be at least 1, runs and duration not negative"}
	case o.OnUnknown != "" && o.OnUnknown != protocol.OnUnknownCheck && o.OnUnknown != protocol.OnUnknownHold:
		return &UsageError{fmt.Sprintf("--on-unknown %q: check, hold, or none (retry)", o.OnUnknown)}
	case o.EffectKills < 0 || o.EffectKills > 1:
		return &UsageError{fmt.Sprintf("--effect-kills %v: a chance, 0 to 1", o.EffectKills)}
	case o.Inject != "" && !slices.Contains(Injections, o.Inject):
		return &UsageError{fmt.Sprintf("--inject %q: one of %v", o.Inject, Injections)}
	case o.Address != "" && o.Cluster:
		return &UsageError{"--address and --cluster exclude each other"}
	case o.Store != "" && o.Store != "dir" && o.Store != "s3":
		return &UsageError{fmt.Sprintf("--store %q: dir or s3", o.Store)}
	case o.Store != "s3" && (o.Inject == "no-cas" || o.S3Restarts > 0 || o.S3Pauses > 0 || o.S3SlowDowns > 0):
		return &UsageError{"--inject no-cas and the S3 faults need --store s3"}
	case o.UpgradeAt < 0 || (o.Unversioned && o.UpgradeAt == 0):
		return &UsageError{"--upgrade-at must be positive, and --unversioned needs it"}
	case o.UpgradeAt > 0 && o.UpgradeAt >= o.Duration:
		return &UsageError{"--upgrade-at must fall within --duration"}
	case o.ServiceKills > 0 && !o.Cluster:
		return &UsageError{"--service-kills needs --cluster"}
	}
	return nil
}

// Summary is the soak's outcome: 'tulip soak --json' prints it as one line.
type Summary struct {
	// Server is what was soaked: "embedded", "cluster" or "address".
	Server    string `json:"server"`
	Runs      int    `json:"runs"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	Stuck     int    `json:"stuck"`
	// Faults counts the faults injected, by kind (nemesis.go).
	Faults map[string]int `json:"faults"`
	// Refunds and DistinctKeys are billing's refunds and their keys.
	Refunds      int `json:"refunds"`
	DistinctKeys int `json:"distinct_keys"`
	// Pages is the pager's pages: one per request.
	Pages int `json:"pages"`
	// WitnessRequests is every request the services received;
	// RetriedRequests those that repeated an executed call with its key on
	// a later attempt (a crash-window retry).
	WitnessRequests int `json:"witness_requests"`
	RetriedRequests int `json:"retried_requests"`
	// EffectKills counts the workers that killed themselves after an
	// effect (Options.EffectKills); RefundsRetried the refund requests
	// among RetriedRequests: each is a second refund at a service that
	// ignored the key.
	EffectKills    int `json:"effect_kills"`
	RefundsRetried int `json:"refunds_retried"`
	// ResolvedByKey counts the executed calls that sent no request of
	// their own, their unknown outcome resolved from the service's record
	// of their key (a check's or a person's lookup), which an earlier
	// request carried: an attempt lost before it sent its request (its
	// worker killed by another call's fault) of a call the thread had
	// already made.
	ResolvedByKey int `json:"resolved_by_key"`
	// Duplicates are calls with a side effect their reference run does not
	// have: executed where it serves (log) or reaching a service where it
	// serves, or reaching one twice (witnesses).
	Duplicates int `json:"duplicates"`
	// ReplayedHistories counts the histories replayed (every run of every
	// chain); DeletedRuns the runs history_delete faults deleted, which
	// are not replayed.
	ReplayedHistories int `json:"replayed_histories"`
	DeletedRuns       int `json:"deleted_runs"`
	// Turns and BaselineTurns are the model turns of the fault phase's
	// runs and of the fault-free phase's.
	Turns         int `json:"turns"`
	BaselineTurns int `json:"baseline_turns"`
	// TurnsPerS and BaselineTurnsPerS are the fault phase's and the
	// fault-free phase's throughput; ThroughputRatio the first over the
	// second.
	TurnsPerS         float64 `json:"turns_per_s"`
	BaselineTurnsPerS float64 `json:"baseline_turns_per_s"`
	ThroughputRatio   float64 `json:"throughput_ratio"`
	// Recovery: for each tool or model activity in flight on a killed
	// worker, the time from the kill to its retry's start.
	RecoverySamples int     `json:"recovery_samples"`
	RecoveryP50S    float64 `json:"recovery_p50_s"`
	RecoveryP99S    float64 `json:"recovery_p99_s"`
	RecoveryMaxS    float64 `json:"recovery_max_s"`
	// Unrecovered are in-flight activities with no later attempt.
	Unrecovered int `json:"unrecovered"`
	// Store is where threads were kept ("dir", "s3"); StaleThreads the
	// threads whose stored state, at the end, is an older run's than the
	// newest run's that history still holds (a late save won).
	Store        string `json:"store"`
	StaleThreads int    `json:"stale_threads"`
	// S3Refused counts the requests the S3 proxy answered 503 SlowDown.
	S3Refused int64 `json:"s3_refused,omitempty"`
	// UpgradedAtS is when, into the fault phase, new runs went to v2 (the
	// upgrade drill; 0: none). Builds counts the histories by the build
	// that ran them. Nondeterministic counts the runs whose wait ended on
	// a task the workers could not replay (tulip.Nondeterminism);
	// NondeterminismFailures the workflow tasks in every history that
	// failed so.
	UpgradedAtS            float64        `json:"upgraded_at_s,omitempty"`
	Builds                 map[string]int `json:"builds,omitempty"`
	Nondeterministic       int            `json:"nondeterministic"`
	NondeterminismFailures int            `json:"nondeterminism_failures"`
	// ReplayFailures counts the histories that do not replay on the
	// build that made them (a run that ended on code other than its
	// start's).
	ReplayFailures int `json:"replay_failures"`
	// Violations name a run and a call each; at most MaxViolations are
	// kept, ViolationCount counts them all.
	Violations     []string `json:"violations,omitempty"`
	ViolationCount int      `json:"violation_count"`
	// Elapsed is the whole soak; CheckS the checker's share.
	ElapsedS           float64 `json:"elapsed_s"`
	CheckS             float64 `json:"check_s"`
	WorkerProcessesRan int     `json:"worker_processes"`
}

// MaxViolations bounds Summary.Violations.
const MaxViolations = 50

func (s *Summary) violate(format string, a ...any) {
	s.ViolationCount++
	if len(s.Violations) < MaxViolations {
		s.Violations = append(s.Violations, fmt.Sprintf(format, a...))
	}
}
