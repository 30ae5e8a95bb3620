package soak

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/demo/pager"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/s3store/s3test"
)

// soak is one soak's parts.
type soak struct {
	o       Options
	dir     string
	bill    *billing.Server
	page    *pager.Server
	srv     server
	proxy   *Proxy
	s3      *s3test.Server // Store "s3"
	s3proxy *S3Proxy
	s3URL   string // the workers' thread store
	c       client.Client
	workers *pool
	w       *workload
	next    map[int]int // thread -> runs started on it
	sum     Summary
	up      drill // the upgrade drill (Options.UpgradeAt)
	// phaseStart is when the fault phase started.
	phaseStart time.Time

	mu       sync.Mutex
	finished map[int]time.Time // thread -> when its last finished run was read
	deleted  map[string]bool   // runs a history_delete deleted
	pending  map[int]bool      // threads whose runs are deleted when next idle
	deletes  int               // history_deletes so far
}

// Run runs a soak: the fault-free baseline, the fault phase, the checker.
// A soak that ran returns its Summary and no error, violations or not
// (Summary.ViolationCount says); an error is a soak that could not run.
func Run(ctx context.Context, o Options) (Summary, error) {
	start := time.Now()
	if err := o.fill(); err != nil {
		return Summary{}, err
	}
	s := &soak{o: o, sum: Summary{Faults: map[string]int{}}, finished: map[int]time.Time{}, deleted: map[string]bool{}, pending: map[int]bool{}}
	defer s.close()
	if err := s.setUp(ctx); err != nil {
		return Summary{}, err
	}
	baseline := s.baseline(ctx)
	faulted, kills := s.faultPhase(ctx)
	s.sum.ThroughputRatio = s.sum.TurnsPerS / max(s.sum.BaselineTurnsPerS, 1e-9)
	checkStart := time.Now()
	s.progress("checking %d runs", len(baseline)+len(faulted))
	if err := s.check(ctx, append(baseline, faulted...), kills); err != nil {
		return Summary{}, err
	}
	s.sum.CheckS = time.Since(checkStart).Seconds()
	s.sum.WorkerProcessesRan += s.workers.stop()
	if v2 := s.up.v2; v2 != nil {
		s.sum.WorkerProcessesRan += v2.stop()
	}
	s.sum.ElapsedS = time.Since(start).Seconds()
	return s.sum, nil
}

func (s *soak) progress(format string, a ...any) {
	fmt.Fprintf(s.o.Progress, "soak: "+format+"\n", a...)
}

// setUp starts the services, the server, the proxy and the workers.
func (s *soak) setUp(ctx context.Context) error {
	var err error
	if s.o.Binary, err = executable(s.o.Binary); err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "tulip-soak-"); err != nil {
		return err
	}
	if s.bill, err = billing.Start(); err != nil {
		return err
	}
	if s.page, err = pager.Start(); err != nil {
		return err
	}
	if err := s.startServer(ctx); err != nil {
		return err
	}
	dc, fc, err := converters(s.o.CodecKeyFile)
	if err != nil {
		return err
	}
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(s.o.Log, &slog.HandlerOptions{Level: slog.LevelError})))
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s.c, err = client.DialContext(dctx, client.Options{HostPort: s.srv.Address(), Namespace: s.o.Namespace, Logger: logger, DataConverter: dc, FailureConverter: fc})
	if err != nil {
		return fmt.Errorf("soak: cannot reach Temporal at %s: %v", s.srv.Address(), err)
	}
	if s.proxy, err = StartProxy(s.srv.Address()); err != nil {
		return err
	}
	tq := "soak-" + randomID()
	s.w = &workload{c: s.c, dc: dc, tq: tq, continueAfter: s.o.ContinueAfterTurns, plainEvery: s.o.PlainEvery, billing: billing.Client{BaseURL: s.bill.URL()}}
	args := []string{"soak-worker", "--address", s.proxy.Address(), "--namespace", s.o.Namespace, "--task-queue", tq,
		"--cache-size", fmt.Sprint(s.o.CacheSize), "--billing", s.bill.URL(), "--pager", s.page.URL(),
		"--attempts", s.attemptsFile(), "--log-level", s.o.LogLevel, "--model-latency", s.o.ModelLatency.String()}
	if s.o.CodecKeyFile != "" {
		args = append(args, "--codec-key-file", s.o.CodecKeyFile)
	}
	if s.o.Inject != "" {
		args = append(args, "--inject", s.o.Inject)
	}
	if s.o.OnUnknown != "" {
		args = append(args, "--on-unknown", s.o.OnUnknown)
	}
	if s.o.EffectKills > 0 {
		args = append(args, "--effect-kills", fmt.Sprint(s.o.EffectKills))
	}
	s.workers = &pool{bin: s.o.Binary, log: s.o.Log}
	s.sum.Store = "dir"
	if s.o.Store == "s3" {
		if err := s.startS3(); err != nil {
			return err
		}
		args = append(args, "--thread-store", s.s3URL)
		s.workers.private = filepath.Join(s.dir, "machines")
		s.workers.env = []string{"AWS_ACCESS_KEY_ID=" + s.s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.s3.SecretKey, "AWS_REGION=" + s.s3.Region}
		s.sum.Store = "s3"
	} else {
		args = append(args, "--thread-dir", s.threadDir())
	}
	if s.o.UpgradeAt > 0 && !s.o.Unversioned {
		s.up.deployment = "soak-agent-" + randomID()
		args = append(args, "--deployment", s.up.deployment, "--build-id", BuildV1)
	}
	s.workers.args = args
	for range s.o.Workers {
		if err := s.workers.spawn(); err != nil {
			return err
		}
	}
	if s.up.deployment != "" {
		if err := s.setCurrent(ctx, BuildV1); err != nil {
			return err
		}
		s.progress("Worker Deployment %s: %s is current", s.up.deployment, BuildV1)
	}
	return nil
}

// startS3 starts the S3 server (SeaweedFS) and the fault proxy in front of
// it; the workers' thread store is a prefix of its bucket, reached through
// the proxy.
func (s *soak) startS3() error {
	s.progress("starting an S3 server (SeaweedFS) and a fault proxy in front of it")
	var err error
	if s.s3, err = s3test.Start(filepath.Join(s.dir, "s3")); err != nil {
		return err
	}
	if s.s3proxy, err = StartS3Proxy(s.s3.Endpoint); err != nil {
		return err
	}
	s.s3URL = fmt.Sprintf("s3://%s/soak-%s/?endpoint=%s&region=%s", s.s3.Bucket, randomID(), s.s3proxy.URL(), s.s3.Region)
	return nil
}

func (s *soak) attemptsFile() string { return filepath.Join(s.dir, "attempts.jsonl") }

// threadDir is the workers' thread store.
func (s *soak) threadDir() string { return filepath.Join(s.dir, "threads") }

func (s *soak) startServer(ctx context.Context) error {
	var err error
	switch {
	case s.o.Address != "":
		s.srv, s.sum.Server = external{addr: s.o.Address}, "address"
	case s.o.Cluster:
		s.progress("starting a cluster (PostgreSQL, frontend, 2 history, matching, worker)")
		s.srv, err = startCluster(ctx, s.o.Binary, s.o.PauseFor, s.o.Retention, s.o.LogLevel)
		s.sum.Server = "cluster"
	default:
		s.srv, err = startEmbedded(s.o.Binary, s.dir, s.o.PauseFor, s.o.Retention, s.o.Log, s.o.LogLevel)
		s.sum.Server = "embedded"
	}
	if err != nil {
		s.srv = nil
	}
	return err
}

func (s *soak) close() {
	if s.workers != nil {
		s.workers.stop()
	}
	if s.up.v2 != nil {
		s.up.v2.stop()
	}
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.s3proxy != nil {
		s.s3proxy.Close()
	}
	if s.s3 != nil {
		s.s3.Close()
	}
	if s.c != nil {
		s.c.Close()
	}
	if s.srv != nil {
		s.srv.Stop()
	}
	if s.bill != nil {
		s.bill.Close()
	}
	if s.page != nil {
		s.page.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// phase plays runs until the deadline (or runs are started), and returns
// them and their throughput in turns per second.
func (s *soak) phase(ctx context.Context, d time.Duration, runs int, perThread bool) ([]*run, float64) {
	var mu sync.Mutex
	var done []*run
	started := map[int]int{}
	blocked := map[int]bool{} // threads whose run cannot go on (nondeterminism)
	total := 0
	if s.next == nil {
		s.next = map[int]int{}
	}
	start := time.Now()
	deadline := start.Add(d)
	pctx, cancel := context.WithTimeout(ctx, d+s.o.StuckAfter)
	defer cancel()
	s.w.playThreads(pctx, s.o.Threads, func(t int) *run {
		mu.Lock()
		defer mu.Unlock()
		if blocked[t] || (perThread && started[t] > 0) || (!perThread && time.Now().After(deadline)) || (runs > 0 && total >= runs) {
			return nil
		}
		started[t]++
		total++
		s.next[t]++
		return s.w.newRun(s.next[t]-1, t)
	}, func(r *run) {
		mu.Lock()
		done = append(done, r)
		blocked[r.thread] = blocked[r.thread] || r.status == statusNondeterministic
		mu.Unlock()
		s.mu.Lock()
		s.finished[r.thread] = time.Now()
		s.mu.Unlock()
		s.idleDelete(ctx, r.thread)
	})
	turns := 0
	for _, r := range done {
		turns += r.turns
	}
	return done, float64(turns) / time.Since(start).Seconds()
}

func turnsOf(runs []*run) int {
	n := 0
	for _, r := range runs {
		n += r.turns
	}
	return n
}

func (s *soak) baseline(ctx context.Context) []*run {
	perThread := s.o.Baseline < 0
	if s.o.Address == "" {
		s.progress("namespace %s: retention %s", s.o.Namespace, s.o.Retention)
	}
	s.progress("%d worker processes; a fault-free baseline of %s over %d threads", s.o.Workers, s.o.Baseline, s.o.Threads)
	runs, tps := s.phase(ctx, max(s.o.Baseline, 0), s.o.Runs, perThread)
	s.sum.BaselineTurnsPerS, s.sum.BaselineTurns = tps, turnsOf(runs)
	return runs
}

// faultPhase plays runs for Duration (or until Runs are started and
// done) while the nemesis works.
func (s *soak) faultPhase(ctx context.Context) ([]*run, []Kill) {
	counts := faultCounts(s.o, s.srv.Kinds())
	n := newNemesis(s.srv, s.proxy, s.workers, s.o)
	n.pick = s.victims
	s.phaseStart = time.Now()
	if s.o.UpgradeAt > 0 {
		uctx, cancel := context.WithCancel(ctx)
		udone := make(chan struct{})
		go func() {
			defer close(udone)
			s.upgrade(uctx)
		}()
		defer func() { // the upgrade's writes are done before the checker reads
			cancel()
			<-udone
		}()
	}
	n.deleteRun = s.deleteHistories
	n.s3, n.s3proxy = s.s3, s.s3proxy
	for _, c := range counts {
		n.faults[c.Kind] = 0
	}
	if s.o.KillEvery > 0 {
		n.faults[WorkerKill] = 0
	}
	s.progress("runs for %s, a worker killed every %s, faults %v", s.o.Duration, s.o.KillEvery, counts)
	// With --runs, the nemesis stops with the phase's last run: when the
	// runs end the phase before --duration, faults scheduled later are not
	// injected (they are counted only when injected) and no worker is
	// killed while nothing runs. Without it, every scheduled fault is.
	nctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.run(nctx, s.o.Duration, Schedule(s.o.Duration, counts))
	}()
	runs, tps := s.phase(ctx, s.o.Duration, s.o.Runs, false)
	if s.o.Runs > 0 {
		stop()
	}
	<-done
	s.sum.TurnsPerS, s.sum.Turns = tps, turnsOf(runs)
	faults, kills := n.counts()
	s.sum.Faults = faults
	return runs, kills
}

// faultCounts are the faults other than worker kills that o asks for, of
// the kinds the server takes (and the proxy's).
func faultCounts(o Options, kinds []string) []Count {
	want := []Count{{ServerRestart, o.ServerRestarts}, {ServerPause, o.Pauses}, {ProxyDrop, o.ProxyDrops}, {ProxyDelay, o.ProxyDelays}}
	if o.HistoryDeletes > 0 {
		want = append(want, Count{HistoryDelete, o.HistoryDeletes})
	}
	want = append(Spread(o.ServiceKills, ServiceKinds), want...)
	want = append(want, Count{S3Restart, o.S3Restarts}, Count{S3Pause, o.S3Pauses}, Count{S3SlowDown, o.S3SlowDowns})
	takes := map[string]bool{ProxyDrop: true, ProxyDelay: true, HistoryDelete: true, S3Restart: o.Store == "s3", S3Pause: o.Store == "s3", S3SlowDown: o.Store == "s3"}
	for _, k := range kinds {
		takes[k] = true
	}
	var out []Count
	for _, c := range want {
		if takes[c.Kind] {
			out = append(out, c)
		}
	}
	return out
}

// check runs the checker: run outcomes, thread logs against the reference,
// witnesses, replays, recovery.
func (s *soak) check(ctx context.Context, runs []*run, kills []Kill) error {
	completed := map[string]bool{}
	perKind := map[bool]int{}
	for _, r := range runs {
		s.sum.Runs++
		perKind[r.plain] = max(perKind[r.plain], r.k+1)
		name := fmt.Sprintf("t%dk%d", r.thread, r.k)
		switch r.status {
		case agentrun.StatusCompleted:
			s.sum.Completed++
			completed[name] = true
		case statusNondeterministic:
			s.sum.Nondeterministic++
			s.sum.violate("run %s (%s %s): %s", name, r.h.WorkflowID, r.h.RunID, r.err)
		case agentrun.StatusFailed:
			s.sum.Failed++
			s.sum.violate("run %s (%s %s): failed: %s", name, r.h.WorkflowID, r.h.RunID, r.err)
		default:
			s.sum.Stuck++
			s.sum.violate("run %s (%s %s): stuck: %s", name, r.h.WorkflowID, r.h.RunID, r.err)
		}
	}
	t0 := time.Now()
	ref, err := s.reference(ctx, perKind)
	if err != nil {
		return err
	}
	s.progress("reference threads played in %s", time.Since(t0).Round(time.Second))
	dups := map[string]bool{}
	reached := s.checkWitnesses(ref, dups)
	serviced := map[string]bool{"issue_refund": true, "page_oncall": true}
	for t, n := range s.next {
		got, err := threadLog(ctx, s.c, s.w.threadID(t), s.store())
		if err != nil {
			s.sum.violate("thread %d: %v", t, err)
			continue
		}
		s.record(CheckThread(t, got, Prefix(ref[s.w.plain(t)], n)), dups)
		full := func(r Record) (*Record, error) { return heldRecord(ctx, s.c, s.w.threadID(t), r) }
		missing, byKey := CheckMissing(got, reached, serviced, func(run string) bool { return completed[run] }, full)
		s.record(missing, dups)
		s.sum.ResolvedByKey += byKey
	}
	s.sum.Duplicates = len(dups)
	if s.s3proxy != nil {
		s.sum.S3Refused = s.s3proxy.Refused()
	}
	if s.o.Store == "s3" && s.o.Inject != "no-thread-store" {
		s.checkStale(ctx)
	}
	t0 = time.Now()
	if err := s.replay(ctx, runs); err != nil {
		return err
	}
	s.progress("%d histories replayed in %s", s.sum.ReplayedHistories, time.Since(t0).Round(time.Second))
	if s.o.UpgradeAt > 0 {
		switch {
		case s.up.upgradedAt().IsZero():
			s.sum.violate("upgrade: v2 never took new runs (the phase ended before --upgrade-at, or v2 was not made current)")
		case s.up.deployment != "" && s.sum.Builds[BuildV2] == 0:
			s.sum.violate("upgrade: no run ran on v2")
		}
	}
	return s.recovery(kills)
}

func (s *soak) record(fs []Finding, dups map[string]bool) {
	for _, f := range fs {
		if f.Duplicate {
			dups[f.Call] = true
		}
		s.sum.violate("%s", f)
	}
}

// reference plays one thread of each kind alone, as far as the soak's
// threads of that kind went, on an in-process worker with no fault and no
// services.
func (s *soak) reference(ctx context.Context, perKind map[bool]int) (map[bool][]Record, error) {
	tq := "soak-ref-" + randomID()
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(), Models: Models(0)})
	if err != nil {
		return nil, err
	}
	wk := sdkworker.New(s.c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	if err := wk.Start(); err != nil {
		return nil, fmt.Errorf("soak: reference worker: %v", err)
	}
	defer wk.Stop()
	ref := &workload{c: s.c, dc: s.w.dc, tq: tq, continueAfter: s.w.continueAfter, plainEvery: s.w.plainEvery}
	return ref.reference(ctx, s.o.Threads, perKind, 2*time.Minute)
}

// checkWitnesses checks the services' requests and returns how many
// reached them for each call and for each key.
func (s *soak) checkWitnesses(ref map[bool][]Record, dups map[string]bool) Reached {
	reqs := append(s.bill.Witnesses(), s.page.Witnesses()...)
	s.sum.WitnessRequests = len(reqs)
	s.sum.Refunds = len(s.bill.Refunds())
	keys := map[string]bool{}
	for _, rc := range s.bill.Refunds() {
		keys[s.bill.KeyOf(rc.RefundID)] = true
	}
	s.sum.DistinctKeys = len(keys)
	s.sum.Pages = s.page.Pages()
	fs, retried := CheckWitnesses(reqs, NewEffects(ref), s.w.plain)
	s.sum.RetriedRequests = retried
	_, s.sum.RefundsRetried = CheckWitnesses(s.bill.Witnesses(), NewEffects(ref), s.w.plain)
	s.record(fs, dups)
	reached := Reached{Calls: map[string]int{}, Keys: map[string]int{}}
	for _, r := range reqs {
		reached.Calls[r.Call]++
		reached.Keys[r.Key]++
	}
	return reached
}

// replay replays every run's chain with the workers' configuration, one
// history in memory at a time.
func (s *soak) replay(ctx context.Context, runs []*run) error {
	dc, fc, err := converters(s.o.CodecKeyFile)
	if err != nil {
		return err
	}
	replayers := map[string]*replayer{}
	for _, build := range []string{BuildV1, BuildV2} {
		wo, err := workerOptions(WorkerOptions{Billing: s.bill.URL(), Pager: s.page.URL(), Inject: s.o.Inject, OnUnknown: s.o.OnUnknown, V2: build == BuildV2})
		if err != nil {
			return err
		}
		ro := sdkworker.WorkflowReplayerOptions{DataConverter: dc, FailureConverter: fc}
		if build == BuildV2 {
			ro.Interceptors = append(ro.Interceptors, &StepAtStart{})
		}
		if replayers[build], err = newReplayer(wo, ro); err != nil {
			return err
		}
	}
	s.sum.DeletedRuns = len(s.deleted)
	for _, r := range runs {
		if r.h.RunID == "" {
			continue
		}
		name := fmt.Sprintf("t%dk%d", r.thread, r.k)
		n, err := replayChain(ctx, s.c, r.h.WorkflowID, r.h.RunID, s.deleted, func(runID string, hist *historypb.History) *replayer {
			return replayers[s.checkVersions(name, runID, hist)]
		})
		s.sum.ReplayedHistories += n
		if err != nil {
			s.sum.ReplayFailures++
			s.sum.violate("run t%dk%d (%s): %v", r.thread, r.k, r.h.WorkflowID, err)
		}
	}
	return nil
}

func (s *soak) recovery(kills []Kill) error {
	rec, err := Recoveries(func() (io.ReadCloser, error) { return os.Open(s.attemptsFile()) }, kills)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s.sum.RecoverySamples = len(rec.Samples)
	s.sum.RecoveryP50S = rec.Percentile(0.5).Seconds()
	s.sum.RecoveryP99S = rec.Percentile(0.99).Seconds()
	if len(rec.Samples) > 0 {
		s.sum.RecoveryMaxS = rec.Samples[len(rec.Samples)-1].Seconds()
	}
	s.sum.EffectKills = rec.EffectKills
	s.sum.Unrecovered = len(rec.Unrecovered)
	for _, u := range rec.Unrecovered {
		s.sum.violate("activity %s: in flight on a killed worker, never retried", u)
	}
	return nil
}

func randomID() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// store is the workers' thread store, as the checker reads it (nil with
// the no-thread-store control).
func (s *soak) store() threadstate.Checkpointer {
	if s.o.Inject == "no-thread-store" {
		return nil
	}
	if s.o.Store == "s3" {
		st, err := s3Threads(context.Background(), s.s3URL, s.o.CodecKeyFile, false, false,
			aws.Credentials{AccessKeyID: s.s3.AccessKey, SecretAccessKey: s.s3.SecretKey, Source: "soak"})
		if err != nil {
			return nil
		}
		return st
	}
	st, err := threadStore(s.threadDir(), s.o.CodecKeyFile)
	if err != nil {
		return nil
	}
	return st
}

// deleteHistories is a history_delete, as a namespace's retention deletes
// runs that closed long ago. In turn: the next time a random thread is
// idle (its run finished, the next not started), every run it has, as
// when a thread sits idle past retention; or, on a thread that runs, its
// runs that closed before its last finished run was read (so none the
// workload still awaits), as retention catches up with a busy thread. The
// thread's next run continues from the thread store.
func (s *soak) deleteHistories(ctx context.Context, rng *rand.Rand) error {
	t := rng.IntN(s.o.Threads)
	s.mu.Lock()
	s.deletes++
	whole := s.deletes%2 == 1
	if whole {
		s.pending[t] = true // done (phase) deletes it when the thread is idle
	}
	before, ok := s.finished[t]
	s.mu.Unlock()
	if whole {
		return nil
	}
	if !ok {
		return nil // nothing closed yet
	}
	n, _, err := s.deleteRuns(ctx, t, func(e *workflowpb.WorkflowExecutionInfo) bool {
		ct := e.GetCloseTime()
		return ct != nil && ct.AsTime().Before(before)
	})
	s.progress("history_delete: thread %d (running): %d closed runs deleted", t, n)
	return err
}

// idleDelete deletes every run of thread t, idle now, if a history_delete
// asked for it, and waits until the server has none.
func (s *soak) idleDelete(ctx context.Context, t int) {
	s.mu.Lock()
	pending := s.pending[t]
	delete(s.pending, t)
	s.mu.Unlock()
	if !pending {
		return
	}
	// Until none is left: a listing may not show a run that closed
	// moments ago (the newest, which describe finds, or a link of its
	// chain).
	n := 0
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for dctx.Err() == nil {
		k, _, err := s.deleteRuns(dctx, t, func(*workflowpb.WorkflowExecutionInfo) bool { return true })
		n += k
		if err != nil {
			s.progress("history_delete: thread %d: %v", t, err)
			return
		}
		if k == 0 {
			break // a pass that found nothing left to delete
		}
	}
	s.progress("history_delete: thread %d (idle): all %d runs deleted", t, n)
}

// deleteRuns deletes the closed runs of thread t that del selects, oldest
// first, waits until they are gone, and says how many it deleted and how
// many runs it saw (listed, or the newest) that it left.
func (s *soak) deleteRuns(ctx context.Context, t int, del func(*workflowpb.WorkflowExecutionInfo) bool) (n, left int, err error) {
	thread := s.w.threadID(t)
	runs := map[string]*workflowpb.WorkflowExecutionInfo{}
	resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `WorkflowId = "` + thread + `"`})
	if err != nil {
		return 0, 0, fmt.Errorf("listing thread %d: %w", t, err)
	}
	for _, e := range resp.GetExecutions() {
		runs[e.GetExecution().GetRunId()] = e
	}
	// The newest run, which visibility may not list yet.
	if d, err := s.c.DescribeWorkflowExecution(ctx, thread, ""); err == nil {
		runs[d.GetWorkflowExecutionInfo().GetExecution().GetRunId()] = d.GetWorkflowExecutionInfo()
	}
	var order []*workflowpb.WorkflowExecutionInfo
	for _, e := range runs {
		if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || e.GetCloseTime() == nil || !del(e) {
			left++
			continue
		}
		order = append(order, e)
	}
	// Oldest first, as retention deletes: a thread is never left with an
	// older run and without a newer one.
	slices.SortFunc(order, func(a, b *workflowpb.WorkflowExecutionInfo) int {
		return a.GetCloseTime().AsTime().Compare(b.GetCloseTime().AsTime())
	})
	var gone []string
	for _, e := range order {
		run := e.GetExecution().GetRunId()
		s.mu.Lock()
		s.deleted[run] = true // before the delete: a replay that finds it gone knows why
		s.mu.Unlock()
		if _, err := s.c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: s.o.Namespace, WorkflowExecution: e.GetExecution()}); err != nil {
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				continue // deleted by an earlier fault
			}
			return n, left, fmt.Errorf("deleting run %s of thread %d: %w", run, t, err)
		}
		gone = append(gone, run)
		n++
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, run := range gone {
		for wctx.Err() == nil {
			_, err := s.c.DescribeWorkflowExecution(wctx, thread, run)
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				break
			}
			sleep(wctx, 100*time.Millisecond)
		}
	}
	return n, left, nil
}

// checkStale checks, once every late save has landed, that each thread's
// stored state is not an older run's than the newest run history holds:
// the store keeps the run that started last, whatever order the saves
// came in (the no-cas control lets a late save of an older run win).
func (s *soak) checkStale(ctx context.Context) {
	sleep(ctx, LateSaveDelay+2*time.Second)
	st := s.store()
	if st == nil {
		s.sum.violate("the thread store cannot be read")
		return
	}
	for t := range s.next {
		thread := s.w.threadID(t)
		latest, err := s.c.DescribeWorkflowExecution(ctx, thread, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue // every run deleted: nothing to compare with
		}
		if err != nil {
			s.sum.violate("thread %d: %v", t, err)
			continue
		}
		info := latest.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			continue
		}
		cp, err := st.Load(ctx, threadstate.ThreadRef{ThreadID: thread})
		if err != nil || cp == nil {
			s.sum.violate("thread %d: its stored state: %v (none: %t)", t, err, cp == nil)
			continue
		}
		newest := info.GetExecution().GetRunId()
		if cp.Run == newest {
			continue
		}
		// Another run's: stale if that run started before the newest
		// (or was deleted: retention deletes the oldest first).
		held, err := s.c.DescribeWorkflowExecution(ctx, thread, cp.Run)
		if err == nil && !held.GetWorkflowExecutionInfo().GetStartTime().AsTime().Before(info.GetStartTime().AsTime()) {
			continue
		}
		if err != nil && !errors.As(err, &nf) {
			s.sum.violate("thread %d: %v", t, err)
			continue
		}
		s.sum.StaleThreads++
		s.sum.violate("thread %d: the store holds run %s's state, older than run %s's (a late save won)", t, cp.Run, newest)
	}
}
