package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
)

const apiToken = "serveload-token"

// run sets everything up, runs the load and the nemesis, tears it all
// down and returns the report.
func run(ctx context.Context, cfg config) (*report, error) {
	progress := func(format string, args ...any) {
		if cfg.verbose {
			fmt.Fprintf(os.Stderr, "serveload %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
	}
	dir, keep := cfg.dir, cfg.dir != ""
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "serveload-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var failed bool
	defer func() {
		if !keep && !failed {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "serveload: logs in %s\n", dir)
		}
	}()
	logFile := func(name string) (*os.File, error) { return os.Create(filepath.Join(dir, name)) }
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}

	// The Temporal server, billing, the model.
	tlog, err := logFile("temporal.log")
	if err != nil {
		return nil, err
	}
	defer tlog.Close()
	progress("starting the Temporal server")
	srv, err := devserver.Start(devserver.Options{LogOutput: tlog, LogLevel: slog.LevelError})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	bill, err := billing.Start()
	if err != nil {
		return nil, err
	}
	defer bill.Close()
	model, err := startUpstream(cfg.upstreamDelay)
	if err != nil {
		return nil, err
	}
	defer model.close()
	var nonce [6]byte
	_, _ = crand.Read(nonce[:])
	runID := hex.EncodeToString(nonce[:])
	taskQueue := "serveload-" + runID

	// The workers.
	wlog, err := logFile("workers.log")
	if err != nil {
		return nil, err
	}
	defer wlog.Close()
	wargs := []string{"-address", srv.Address(), "-task-queue", taskQueue, "-billing", bill.URL(), "-model", model.url}
	if cfg.breakDedup {
		wargs = append(wargs, "-break-dedup")
	}
	pool := &workerPool{bin: self, args: wargs, log: wlog, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))}
	defer pool.stop()
	progress("starting %d workers", cfg.workers)
	if err := parallel(cfg.workers, func(int) error { return pool.spawn() }); err != nil {
		return nil, err
	}

	// The serve instances.
	idKey := filepath.Join(dir, "serve.idkey")
	keys := filepath.Join(dir, "serve.keys")
	key := make([]byte, 32)
	_, _ = crand.Read(key)
	if err := os.WriteFile(idKey, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keys, []byte(apiToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	bin := []string{self, "-role", "serve"}
	if cfg.tulipBin != "" {
		bin = []string{cfg.tulipBin}
	}
	sargs := []string{"--address", srv.Address(), "--no-worker", "--task-queue", taskQueue, "--id-key-file", idKey, "--api-key-file", keys}
	var inst []*serveInstance
	var hosts []string
	for i := range 2 {
		port, err := devserver.FreePort("127.0.0.1")
		if err != nil {
			return nil, err
		}
		l, err := logFile(fmt.Sprintf("serve-%d.log", i+1))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		inst = append(inst, &serveInstance{bin: bin, args: sargs, host: host, log: l})
		hosts = append(hosts, host)
	}
	defer func() {
		for _, s := range inst {
			s.stop(30 * time.Second)
		}
	}()
	progress("starting 2 serve instances")
	if err := parallel(len(inst), func(i int) error { return inst[i].start() }); err != nil {
		return nil, err
	}
	px, err := startProxy(hosts)
	if err != nil {
		return nil, err
	}
	defer px.close()

	// The load.
	mem := startSampler(inst)
	time.Sleep(1500 * time.Millisecond)
	var baseline int64
	for _, v := range mem.sample() {
		baseline += v
	}
	clog, err := logFile("client.log")
	if err != nil {
		return nil, err
	}
	defer clog.Close()
	var clogMu sync.Mutex
	l := &load{cfg: cfg, oc: newClient(px.url, apiToken, cfg.conversations), run: runID,
		log: func(format string, args ...any) {
			clogMu.Lock()
			defer clogMu.Unlock()
			fmt.Fprintf(clog, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		}}
	// CPU time the children spent before the load counts out.
	cpu0 := readCPU(append(pool.pids(), inst[0].pid(), inst[1].pid())...)
	start := time.Now()
	l.end = start.Add(cfg.duration)
	progress("%d conversations for %s (workers killed every %s, serve 2 restarted at %.0f%%)", cfg.conversations, cfg.duration, cfg.killEvery, 100*cfg.restartAt)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	for c := range cfg.conversations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.conversation(lctx, c+1)
		}()
	}
	nem := &nemesis{pool: pool, proxy: px, inst: inst[1], log: l.log, progress: progress}
	nctx, stopNemesis := context.WithCancel(lctx)
	nemDone := make(chan struct{})
	go func() {
		defer close(nemDone)
		nem.run(nctx, start, cfg)
	}()
	// Progress while it runs.
	tick := time.NewTicker(30 * time.Second)
	loadDone := make(chan struct{})
	go func() { wg.Wait(); close(loadDone) }()
wait:
	for {
		select {
		case <-loadDone:
			break wait
		case <-tick.C:
			a, s := l.counts()
			progress("%s: %d turns answered of %d sent", time.Since(start).Round(time.Second), a, s)
		case <-ctx.Done():
			stopLoad()
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	stopNemesis()
	<-nemDone
	if ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, cfg.settle)
		l.settle(sctx)
		cancel()
	}
	endNow := mem.sample()
	peaks, peakSum := mem.end()
	progress("load over after %s; checking", elapsed.Round(time.Second))
	if ctx.Err() != nil {
		failed = true
		return nil, errors.New("interrupted")
	}
	// In-flight work ended with the load: stop the instances, then read
	// billing's witness.
	for _, s := range inst {
		s.stop(30 * time.Second)
	}
	pool.stop()
	time.Sleep(300 * time.Millisecond) // the killed workers are reaped: their CPU time counts
	cpu1 := readCPU()
	rep := l.report(bill, model, elapsed)
	if d := cpu1.total - cpu0.total; d > 0 {
		rep.MachineBusyPct = 100 * float64(cpu1.machine-cpu0.machine) / float64(d)
		rep.OwnCPUPct = 100 * float64(cpu1.own-cpu0.own) / float64(d)
	}
	rep.WorkerKills = pool.killCount()
	rep.ServeRestarts = nem.restarts
	rep.RestartDowntime = ms(nem.downtime)
	rep.ServeRSSBaselineMB = mb(baseline)
	rep.ServeRSSPeakMB = mb(peakSum)
	for i := range inst {
		rep.ServeRSSPeakEachMB = append(rep.ServeRSSPeakEachMB, mb(peaks[i]))
		rep.ServeRSSEndEachMB = append(rep.ServeRSSEndEachMB, mb(endNow[i]))
	}
	if rep.OpenThreadsPeak > 0 {
		rep.MemPerOpenThreadKB = float64(peakSum-baseline) / 1024 / float64(rep.OpenThreadsPeak)
	}
	rep.ProxyFailovers, rep.ProxyAmbiguous, rep.ProxyNotSent = px.failovers.Load(), px.ambiguous.Load(), px.notSent.Load()
	rep.finish()
	failed = !rep.OK && !cfg.breakDedup
	if keep || failed {
		rep.Logs = dir
	}
	return rep, nil
}

// nemesis kills workers and restarts the second serve instance.
type nemesis struct {
	pool     *workerPool
	proxy    *proxy
	inst     *serveInstance
	log      func(string, ...any)
	progress func(string, ...any)

	restarts int
	downtime time.Duration
}

func (n *nemesis) run(ctx context.Context, start time.Time, cfg config) {
	var kill <-chan time.Time
	if cfg.killEvery > 0 {
		t := time.NewTicker(cfg.killEvery)
		defer t.Stop()
		kill = t.C
	}
	var restart <-chan time.Time
	if cfg.restartAt > 0 {
		restart = time.After(time.Until(start.Add(time.Duration(cfg.restartAt * float64(cfg.duration)))))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-kill:
			if time.Since(start) >= cfg.duration {
				continue
			}
			if err := n.pool.kill(); err != nil {
				n.log("nemesis: worker kill: %v", err)
			}
			n.progress("killed a worker (SIGKILL), started another")
			n.log("nemesis: killed a worker")
		case <-restart:
			n.restart()
		}
	}
}

// restart restarts the second serve instance as a rolling restart does:
// out of the proxy's rotation, SIGTERM (its streams end with an event
// that says where to resume), start again on the same port, back in.
func (n *nemesis) restart() {
	at := time.Now()
	n.proxy.setOut(1, true)
	// Connections the proxy opened to it before are accepted and read by
	// now; no new ones come. Requests in flight there go on.
	time.Sleep(200 * time.Millisecond)
	clean := n.inst.stop(60 * time.Second)
	n.log("nemesis: serve 2 stopped (exited by itself: %v)", clean)
	for i := 0; ; i++ {
		err := n.inst.start()
		if err == nil {
			break
		}
		n.log("nemesis: serve 2 start: %v", err)
		if i == 5 {
			n.progress("serve 2 did not start again: %v", err)
			return
		}
		time.Sleep(time.Second)
	}
	n.proxy.setOut(1, false)
	n.restarts++
	n.downtime = time.Since(at)
	n.progress("restarted serve 2 (out of rotation for %s)", n.downtime.Round(time.Millisecond))
	n.log("nemesis: serve 2 back after %s", n.downtime)
}

// parallel runs f(0..n-1) at once and returns the first error.
func parallel(n int, f func(int) error) error {
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- f(i) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (l *load) counts() (answered, sent int64) {
	return l.answered.Load(), l.sent.Load()
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
