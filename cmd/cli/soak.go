package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/dedup"
	"github.com/tulip-temporal/tulip/demo"
	"github.com/tulip-temporal/tulip/demo/billing"
	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/scenario"
	tworker "github.com/tulip-temporal/tulip/worker"
	"github.com/tulip-temporal/tulip/workflow"
)

// SoakSummary is 'tulip soak --json”s summary line.
type SoakSummary struct {
	Runs               int            `json:"runs"`
	Completed          int            `json:"completed"`
	Failed             int            `json:"failed"`
	Faults             map[string]int `json:"faults"`
	Refunds            int            `json:"refunds"`
	DistinctKeys       int            `json:"distinct_keys"`
	Duplicates         int            `json:"duplicates"`
	Stuck              int            `json:"stuck"`
	TurnsPerS          float64        `json:"turns_per_s"`
	BaselineTurnsPerS  float64        `json:"baseline_turns_per_s"`
	Violations         []string       `json:"violations,omitempty"`
	ReplayedHistories  int            `json:"replayed_histories"`
	ElapsedS           float64        `json:"elapsed_s"`
	WorkerProcessesRan int            `json:"worker_processes"`
}

// soakScript is run i's script on its thread (thread index t): refunds and
// pages repeated within a response and across turns, and every third run
// an approval interrupt, resumed (performing the held call, then refunding
// again unmatched).
func soakScript(i, t int) scenario.Run {
	refund := fmt.Sprintf(`{"order_id": "ord-%d", "amount": 10}`, t)
	refundAgain := fmt.Sprintf(`{"amount": 10, "order_id": "ord-%d"}`, t)
	page := fmt.Sprintf(`{"case_id": "case-%d", "summary": "refund"}`, t)
	id := func(s string) string { return fmt.Sprintf("r%d-%s", i, s) }
	run := scenario.Run{Hooks: []string{"approve_isolate_host"}, Turns: []scenario.Turn{
		{ToolCalls: []activities.ToolCall{{ID: id("a"), Name: "issue_refund", Arguments: refund}, {ID: id("b"), Name: "issue_refund", Arguments: refundAgain}}},
		{ToolCalls: []activities.ToolCall{{ID: id("c"), Name: "page_oncall", Arguments: page}, {ID: id("d"), Name: "mint_case_id", Arguments: "{}"}}},
		{ToolCalls: []activities.ToolCall{{ID: id("e"), Name: "issue_refund", Arguments: refundAgain}, {ID: id("f"), Name: "page_oncall", Arguments: page}}},
	}}
	if i%3 == 0 {
		run.Turns = append(run.Turns, scenario.Turn{ToolCalls: []activities.ToolCall{{ID: id("g"), Name: "isolate_host", Arguments: fmt.Sprintf(`{"host": "web-%d"}`, t)}}})
		run.Resumes = []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{
			{ToolCalls: []activities.ToolCall{{ID: id("h"), Name: "issue_refund", Arguments: refund}}}}}}
	}
	return run
}

// soakModel plays run i's script, i and its thread read from the run's
// message ("soak run I thread T").
func soakModel() activities.Model {
	return activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		for k := len(req.Messages) - 1; k >= 0; k-- {
			var i, t int
			if m := req.Messages[k]; m.Role == "user" {
				if n, _ := fmt.Sscanf(m.Content, "soak run %d thread %d", &i, &t); n == 2 {
					return soakScript(i, t).Model().Respond(ctx, req)
				}
			}
		}
		return activities.ModelResponse{}, fmt.Errorf("soak: no run message")
	})
}

func soakModels() map[string]activities.Model {
	return map[string]activities.Model{"soak": soakModel()}
}

// soakWorker is the hidden 'tulip soak-worker' command: one worker process
// of a soak, with a small sticky cache, until it is killed.
func (e *env) soakWorker(args []string) error {
	fs := e.flags("soak-worker")
	addr := fs.String("address", "", "")
	tq := fs.String("task-queue", "", "")
	cache := fs.Int("cache-size", 2, "")
	bill := fs.String("billing", "", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	sdkworker.SetStickyWorkflowCacheSize(*cache)
	c, err := client.Dial(client.Options{HostPort: *addr, Logger: e.logger()})
	if err != nil {
		return err
	}
	defer c.Close()
	tb := demo.NewToolbox()
	tb.UseBilling(billing.Client{BaseURL: *bill})
	s := &session{client: c}
	stop, err := s.startWorker(*tq, tworker.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: soakModels()})
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintln(e.stdout, "ready")
	<-e.ctx.Done()
	return nil
}

type soakRun struct {
	i, thread int
	h         agent.Handle
	status    string
	err       string
	turns     int
}

func (e *env) soak(args []string) error {
	fs := e.flags("soak")
	addr := fs.String("address", "", "a Temporal frontend (default: an embedded server on a file database, restarted by the nemesis)")
	workers := fs.Int("workers", 3, "worker OS processes on one task queue")
	cache := fs.Int("cache-size", 2, "each worker's sticky cache size (small: runs are evicted and replayed)")
	threads := fs.Int("threads", 6, "threads the runs are spread over")
	runs := fs.Int("runs", 0, "stop after this many agent runs (after a fault-free baseline of one run per thread); 0: only --duration bounds them")
	killEvery := fs.Duration("kill-every", 5*time.Second, "SIGKILL a random worker process this often, and start a new one (0: never)")
	restarts := fs.Int("server-restarts", 1, "stop the embedded server and start it again on the same database this many times")
	duration := fs.Duration("duration", 2*time.Minute, "start runs with faults for this long, then check")
	asJSON := fs.Bool("json", false, "print the summary as one JSON line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if e.getenv("TULIP_CODEC_KEY_FILE") != "" {
		// Its workers, reference runs and replays would need the keys too.
		return usageError{"soak runs unencrypted payloads: unset TULIP_CODEC_KEY_FILE"}
	}
	if *workers < 1 || *threads < 1 || *runs < 0 || *duration <= 0 {
		return usageError{"usage: tulip soak [--workers N] [--threads T] [--runs R] [--kill-every D] [--server-restarts K] [--duration D] [--json]"}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start := time.Now()
	bill, err := billing.Start()
	if err != nil {
		return err
	}
	defer bill.Close()

	// The server: embedded, on a file, on a fixed port so that it can
	// come back where clients and workers look for it.
	var srv *devserver.Server
	var srvMu sync.Mutex
	dir, err := os.MkdirTemp("", "tulip-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "soak.db")
	address := *addr
	port := 0
	startServer := func() error {
		s, err := devserver.Start(devserver.Options{DBFile: db, Port: port, LogOutput: e.stderr, LogLevel: e.logLevel(slog.LevelError)})
		if err != nil {
			return err
		}
		srvMu.Lock()
		srv = s
		srvMu.Unlock()
		address = s.Address()
		_, p, _ := strings.Cut(address, ":")
		fmt.Sscan(p, &port)
		return nil
	}
	if address == "" {
		if err := startServer(); err != nil {
			return err
		}
		defer func() {
			srvMu.Lock()
			defer srvMu.Unlock()
			srv.Stop()
		}()
	} else {
		*restarts = 0
	}
	c, err := client.Dial(client.Options{HostPort: address, Logger: e.logger()})
	if err != nil {
		return fmt.Errorf("cannot reach Temporal at %s: %v", address, err)
	}
	defer c.Close()
	tq := "soak-" + randomID()

	// Worker processes.
	var procMu sync.Mutex
	var procs []*exec.Cmd
	spawned := 0
	spawn := func() error {
		cmd := exec.Command(self, "soak-worker", "--address", address, "--task-queue", tq, "--cache-size", fmt.Sprint(*cache),
			"--billing", bill.URL())
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		cmd.Stderr = e.stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			_ = cmd.Process.Kill()
			return fmt.Errorf("a soak worker did not start: %v", err)
		}
		procMu.Lock()
		procs = append(procs, cmd)
		spawned++
		procMu.Unlock()
		go func() { _ = cmd.Wait() }()
		return nil
	}
	for range *workers {
		if err := spawn(); err != nil {
			return err
		}
	}
	defer func() {
		procMu.Lock()
		defer procMu.Unlock()
		for _, p := range procs {
			_ = p.Process.Kill()
		}
	}()
	prefix := tq
	threadID := func(t int) string { return fmt.Sprintf("%s-thread-%d", prefix, t) }

	// play runs, each thread's in order, threads at once, until next says
	// there are no more.
	play := func(ctx context.Context, next func(thread int) *soakRun) []*soakRun {
		var mu sync.Mutex
		var done []*soakRun
		var wg sync.WaitGroup
		for t := range *threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := next(t); r != nil; r = next(t) {
					e.playSoakRun(ctx, c, tq, threadID(r.thread), r)
					mu.Lock()
					done = append(done, r)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return done
	}
	turnsOf := func(list []*soakRun) int {
		n := 0
		for _, r := range list {
			n += r.turns
		}
		return n
	}

	// Baseline: one run per thread, no faults.
	var nextMu sync.Mutex
	nextI := 0
	e.progress("soak: %d worker processes, baseline of %d runs", *workers, *threads)
	bctx, bcancel := context.WithTimeout(e.ctx, *duration)
	bstart := time.Now()
	baselineDone := map[int]bool{}
	all := play(bctx, func(t int) *soakRun {
		nextMu.Lock()
		defer nextMu.Unlock()
		if baselineDone[t] {
			return nil
		}
		baselineDone[t] = true
		nextI++
		return &soakRun{i: nextI - 1, thread: t}
	})
	bcancel()
	sum := SoakSummary{Faults: map[string]int{"worker_kill": 0, "server_restart": 0}}
	sum.BaselineTurnsPerS = float64(turnsOf(all)) / time.Since(bstart).Seconds()

	// The fault phase: runs start until --duration (or --runs), then
	// every started run is given time to end.
	deadline := time.Now().Add(*duration)
	fctx, fcancel := context.WithTimeout(e.ctx, *duration+3*time.Minute)
	defer fcancel()
	nemesisDone := make(chan struct{})
	var faultMu sync.Mutex
	stopNemesis := make(chan struct{})
	go func() {
		defer close(nemesisDone)
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		tick := *killEvery
		if tick <= 0 {
			tick = time.Second
		}
		// Server restarts spread evenly over the fault phase.
		restartAt := map[int]bool{}
		ticks := int(*duration / tick)
		for k := 1; k <= *restarts; k++ {
			restartAt[max(1, k*ticks/(*restarts+1))] = true
		}
		for n := 1; ; n++ {
			select {
			case <-stopNemesis:
				return
			case <-time.After(tick):
			}
			if *killEvery > 0 && time.Now().Before(deadline) {
				procMu.Lock()
				victim := procs[rng.IntN(len(procs))]
				procs = slicesDelete(procs, victim)
				procMu.Unlock()
				_ = victim.Process.Signal(syscall.SIGKILL)
				if err := spawn(); err != nil {
					e.progress("soak: %v", err)
				}
				faultMu.Lock()
				sum.Faults["worker_kill"]++
				faultMu.Unlock()
			}
			if restartAt[n] && *addr == "" {
				srvMu.Lock()
				srv.Stop()
				srvMu.Unlock()
				time.Sleep(500 * time.Millisecond)
				if err := startServer(); err != nil {
					e.progress("soak: server restart: %v", err)
					return
				}
				faultMu.Lock()
				sum.Faults["server_restart"]++
				faultMu.Unlock()
				delete(restartAt, n)
			}
		}
	}()
	e.progress("soak: runs over %d threads for %s, a worker killed every %s, %d server restarts", *threads, *duration, *killEvery, *restarts)
	fstart := time.Now()
	started := 0
	faulted := play(fctx, func(t int) *soakRun {
		nextMu.Lock()
		defer nextMu.Unlock()
		if time.Now().After(deadline) || (*runs > 0 && started >= *runs) {
			return nil
		}
		started++
		nextI++
		return &soakRun{i: nextI - 1, thread: t}
	})
	sum.TurnsPerS = float64(turnsOf(faulted)) / time.Since(fstart).Seconds()
	close(stopNemesis)
	<-nemesisDone
	all = append(all, faulted...)

	// The checker.
	e.progress("soak: checking")
	ref, err := e.soakReference(c, all)
	if err != nil {
		return err
	}
	replayer := tworker.ReplayOptions{}
	ropts := tworker.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks()}
	for _, r := range all {
		sum.Runs++
		switch r.status {
		case workflow.StatusCompleted:
			sum.Completed++
		case workflow.StatusFailed:
			sum.Failed++
			sum.Violations = append(sum.Violations, fmt.Sprintf("run %d (%s): failed: %s", r.i, r.h.WorkflowID, r.err))
			continue
		default:
			sum.Stuck++
			sum.Violations = append(sum.Violations, fmt.Sprintf("run %d (%s): stuck (%s)", r.i, r.h.WorkflowID, r.err))
			continue
		}
		recs, err := agent.Log(e.ctx, c, r.h)
		if err != nil {
			sum.Violations = append(sum.Violations, fmt.Sprintf("run %d: reading its log: %v", r.i, err))
			continue
		}
		want := ref[r.i]
		if len(recs) != len(want) {
			sum.Violations = append(sum.Violations, fmt.Sprintf("run %d: %d records, alone it makes %d", r.i, len(recs), len(want)))
			continue
		}
		for k := range recs {
			g, w := recs[k], want[k]
			if g.Origin != w.Origin || !sameInt(g.ServedFrom, w.ServedFrom) || g.CallID != w.CallID {
				if g.Origin == dedup.Executed && w.Origin == dedup.Served {
					sum.Duplicates++
				}
				sum.Violations = append(sum.Violations, fmt.Sprintf("run %d record %d (%s): %s from %v, alone %s from %v",
					r.i, k, g.CallID, g.Origin, deref(g.ServedFrom), w.Origin, deref(w.ServedFrom)))
			}
		}
		for _, h := range e.soakHistories(c, r.h) {
			if err := replayHistory(ropts, replayer, h); err != nil {
				sum.Violations = append(sum.Violations, fmt.Sprintf("run %d: history does not replay: %v", r.i, err))
			}
			sum.ReplayedHistories++
		}
	}
	keys := map[string]bool{}
	for _, rc := range bill.Refunds() {
		sum.Refunds++
		keys[bill.KeyOf(rc.RefundID)] = true
	}
	sum.DistinctKeys = len(keys)
	if sum.Refunds != sum.DistinctKeys {
		sum.Duplicates += sum.Refunds - sum.DistinctKeys
		sum.Violations = append(sum.Violations, fmt.Sprintf("billing made %d refunds for %d keys", sum.Refunds, sum.DistinctKeys))
	}
	if sum.DistinctKeys != *threads {
		sum.Violations = append(sum.Violations, fmt.Sprintf("billing saw %d refund keys, the scripts use %d", sum.DistinctKeys, *threads))
	}
	sum.ElapsedS = time.Since(start).Seconds()
	sum.WorkerProcessesRan = spawned
	e.printSoak(sum, *asJSON)
	if len(sum.Violations) > 0 {
		for _, v := range sum.Violations {
			fmt.Fprintln(e.stderr, "tulip: soak: "+v)
		}
		return exitCode(1)
	}
	return nil
}

func slicesDelete(ps []*exec.Cmd, p *exec.Cmd) []*exec.Cmd {
	out := ps[:0]
	for _, q := range ps {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int) any {
	if p == nil {
		return "-"
	}
	return *p
}

// playSoakRun plays one run to its end: it starts it (again, while the
// server is away), resumes its interrupt (every sixth run twice, every
// fourth by signal), and waits for it.
func (e *env) playSoakRun(ctx context.Context, c client.Client, tq, thread string, r *soakRun) {
	opts := agent.RunOptions{TaskQueue: tq, Model: "soak", ThreadID: thread, Message: fmt.Sprintf("soak run %d thread %d", r.i, r.thread),
		Hooks: []string{"approve_isolate_host"}, WorkflowTaskTimeout: 2 * time.Second}
	for {
		h, err := agent.Start(ctx, c, opts)
		if err == nil {
			r.h = h
			break
		}
		var busy *agent.ThreadBusyError
		if errors.As(err, &busy) || ctx.Err() != nil {
			r.status, r.err = "stuck", err.Error()
			return
		}
		time.Sleep(200 * time.Millisecond) // the server is restarting
	}
	skip := ""
	for {
		res, err := agent.Await(ctx, c, r.h, skip)
		if ctx.Err() != nil {
			r.status, r.err = "stuck", "no end before the deadline"
			return
		}
		var failed *agent.RunFailedError
		if errors.As(err, &failed) {
			r.status, r.err = workflow.StatusFailed, failed.Error()
			return
		}
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		r.turns = res.Turns
		if res.Status != workflow.StatusInterrupted {
			r.status = res.Status
			return
		}
		in := workflow.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true}
		for attempt := 0; ; attempt++ {
			if r.i%4 == 0 {
				err = agent.ResumeBySignal(ctx, c, r.h.WorkflowID, in)
			} else {
				_, err = agent.Resume(ctx, c, r.h.WorkflowID, in)
			}
			if err == nil && r.i%6 == 0 {
				_, err = agent.Resume(ctx, c, r.h.WorkflowID, in) // again: a duplicate
			}
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		skip = res.Interrupt.ID
	}
}

// soakReference plays every thread's runs alone, in order, with no fault,
// on an in-process worker: the logs each run must have made.
func (e *env) soakReference(c client.Client, all []*soakRun) (map[int][]dedup.Record, error) {
	tq := "soak-ref-" + randomID()
	s := &session{client: c}
	stop, err := s.startWorker(tq, tworker.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(), Models: soakModels()})
	if err != nil {
		return nil, err
	}
	defer stop()
	byThread := map[int][]*soakRun{}
	for _, r := range all {
		byThread[r.thread] = append(byThread[r.thread], r)
	}
	ref := map[int][]dedup.Record{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for t, rs := range byThread {
		sort.Slice(rs, func(a, b int) bool { return rs[a].i < rs[b].i })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range rs {
				rr := &soakRun{i: r.i, thread: r.thread}
				ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
				e.playSoakRun(ctx, c, tq, fmt.Sprintf("%s-thread-%d", tq, t), rr)
				cancel()
				var recs []dedup.Record
				err := fmt.Errorf("soak: the reference of run %d did not complete: %s %s", r.i, rr.status, rr.err)
				if rr.status == workflow.StatusCompleted {
					recs, err = agent.Log(e.ctx, c, rr.h)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ref[r.i] = recs
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ref, firstErr
}

// soakHistories fetches h's history (soak runs are too short to continue as
// new, so one run is the whole chain); none when it cannot be read.
func (e *env) soakHistories(c client.Client, h agent.Handle) []*historypb.History {
	var out []*historypb.History
	it := c.GetWorkflowHistory(e.ctx, h.WorkflowID, h.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return out
		}
		hist.Events = append(hist.Events, ev)
	}
	return append(out, hist)
}

func replayHistory(opts tworker.Options, ro tworker.ReplayOptions, h *historypb.History) error {
	f, err := os.CreateTemp("", "soak-history-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	b, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	f.Close()
	return tworker.ReplayHistories(opts, ro, f.Name())
}

func (e *env) printSoak(sum SoakSummary, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(e.stdout, string(b))
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "runs\t%d (completed %d, failed %d, stuck %d)\n", sum.Runs, sum.Completed, sum.Failed, sum.Stuck)
	fmt.Fprintf(tw, "faults\tworker kills %d, server restarts %d\n", sum.Faults["worker_kill"], sum.Faults["server_restart"])
	fmt.Fprintf(tw, "refunds at billing\t%d for %d distinct keys\n", sum.Refunds, sum.DistinctKeys)
	fmt.Fprintf(tw, "duplicate side effects\t%d\n", sum.Duplicates)
	fmt.Fprintf(tw, "histories replayed\t%d\n", sum.ReplayedHistories)
	fmt.Fprintf(tw, "throughput\t%.1f turns/s with faults, %.1f fault-free (%.2fx)\n", sum.TurnsPerS, sum.BaselineTurnsPerS, sum.TurnsPerS/max(sum.BaselineTurnsPerS, 1e-9))
	fmt.Fprintf(tw, "elapsed\t%.0f s, %d worker processes\n", sum.ElapsedS, sum.WorkerProcessesRan)
	tw.Flush()
}
