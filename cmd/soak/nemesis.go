package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/tulip-temporal/tulip/s3store/s3test"
)

// Fault kinds beside the server's (server.go).
const (
	// WorkerKill SIGKILLs a random worker process; a new one takes its
	// place.
	WorkerKill = "worker_kill"
	// ProxyDrop closes every connection between the workers and the
	// server.
	ProxyDrop = "proxy_drop"
	// ProxyDelay delays everything between the workers and the server.
	ProxyDelay = "proxy_delay"
	// HistoryDelete deletes the closed histories of a thread's finished
	// runs, as retention would.
	HistoryDelete = "history_delete"
	// S3Restart restarts the S3 server's gateway; S3Pause SIGSTOPs it
	// for PauseFor; S3SlowDown has the proxy in front of it answer 503
	// SlowDown for PauseFor (longer, up to three times, until it has
	// refused a request).
	S3Restart  = "s3_restart"
	S3Pause    = "s3_pause"
	S3SlowDown = "s3_slow_down"
)

// ServiceKinds are the kinds --service-kills takes turns over, on a
// cluster.
var ServiceKinds = []string{HistoryKill, MatchingKill, FrontendKill, DBRestart}

// Fault is one scheduled fault: its kind, at this offset into the fault
// phase.
type Fault struct {
	At   time.Duration
	Kind string
}

// Count is how many faults of a kind to schedule.
type Count struct {
	Kind string
	N    int
}

// Schedule spreads each kind's faults evenly over d (fault j of n at
// (j+1)·d/(n+1), kinds offset a little from each other so that they do not
// coincide), in time order.
func Schedule(d time.Duration, counts []Count) []Fault {
	var out []Fault
	for m, c := range counts {
		if c.N <= 0 {
			continue
		}
		slot := d / time.Duration(c.N+1)
		shift := slot / time.Duration(4*(len(counts)+1)) * time.Duration(m)
		for j := range c.N {
			out = append(out, Fault{At: slot*time.Duration(j+1) + shift, Kind: c.Kind})
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].At < out[b].At })
	return out
}

// Spread deals n faults over kinds in turn, the first kinds getting the
// remainder.
func Spread(n int, kinds []string) []Count {
	out := make([]Count, len(kinds))
	for k, kind := range kinds {
		out[k] = Count{Kind: kind, N: n / len(kinds)}
		if k < n%len(kinds) {
			out[k].N++
		}
	}
	return out
}

// nemesis injects faults: worker kills on a ticker, the rest by schedule,
// one after another.
type nemesis struct {
	srv     server
	proxy   *Proxy
	workers *pool
	// pick, when set, is the pool a worker kill picks from (the upgrade
	// drill's v1 or v2); nil: workers.
	pick      func() *pool
	deleteRun func(ctx context.Context, rng *rand.Rand) error // a history_delete
	s3        *s3test.Server                                  // with Store "s3"
	s3proxy   *S3Proxy
	killEvery time.Duration
	delay     time.Duration
	delayFor  time.Duration
	progress  io.Writer
	rng       *rand.Rand

	mu     sync.Mutex
	faults map[string]int
	kills  []Kill
}

func newNemesis(srv server, proxy *Proxy, workers *pool, o Options) *nemesis {
	n := &nemesis{srv: srv, proxy: proxy, workers: workers, killEvery: o.KillEvery, delay: o.ProxyDelay, delayFor: o.PauseFor,
		progress: o.Progress, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)), faults: map[string]int{}}
	return n
}

// run injects faults: a worker every killEvery (when positive) for d, and
// every fault of the schedule, each at its time or, when the one before
// took longer (a server slow to come back), right after it: the counts
// asked for are the counts injected. It returns once both are done.
func (n *nemesis) run(ctx context.Context, d time.Duration, schedule []Fault) {
	kctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	if n.killEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(n.killEvery)
			defer t.Stop()
			for {
				select {
				case <-kctx.Done():
					return
				case <-t.C:
					n.inject(kctx, WorkerKill)
				}
			}
		}()
	}
	start := time.Now()
	for _, f := range schedule {
		sleep(ctx, time.Until(start.Add(f.At)))
		if ctx.Err() != nil {
			break
		}
		n.inject(ctx, f.Kind)
	}
	wg.Wait()
}

// inject injects one fault of kind and counts it (an error is reported,
// the fault counted: it was injected, the server was slow to come back).
func (n *nemesis) inject(ctx context.Context, kind string) {
	var err error
	switch kind {
	case WorkerKill:
		p := n.workers
		if n.pick != nil {
			p = n.pick()
		}
		n.mu.Lock()
		var k Kill
		k, err = p.kill(n.rng)
		n.mu.Unlock()
		if err == nil {
			n.mu.Lock()
			n.kills = append(n.kills, k)
			n.mu.Unlock()
			err = p.spawn()
		}
	case HistoryDelete:
		n.mu.Lock()
		rng := rand.New(rand.NewPCG(n.rng.Uint64(), 11))
		n.mu.Unlock()
		err = n.deleteRun(ctx, rng)
	case S3Restart:
		err = n.s3.Restart()
	case S3Pause:
		if err = n.s3.Pause(); err == nil {
			sleep(ctx, n.delayFor)
			err = n.s3.Resume()
		}
	case S3SlowDown:
		// A slow-down that refused nothing was no fault: with few threads
		// a window can pass with no request in it (workers restarting, a
		// model call in flight), so the window stays open until it has
		// refused one, for at most three times its length.
		before := n.s3proxy.Refused()
		n.s3proxy.Fail(true)
		sleep(ctx, n.delayFor)
		for end := time.Now().Add(2 * n.delayFor); n.s3proxy.Refused() == before && time.Now().Before(end) && ctx.Err() == nil; {
			sleep(ctx, 100*time.Millisecond)
		}
		n.s3proxy.Fail(false)
	case ProxyDrop:
		n.proxy.Drop()
	case ProxyDelay:
		n.proxy.Delay(n.delay)
		sleep(ctx, n.delayFor)
		n.proxy.Delay(0)
	default:
		err = n.srv.Inject(context.WithoutCancel(ctx), kind)
	}
	if err != nil {
		fmt.Fprintf(n.progress, "soak: %s: %v\n", kind, err)
	}
	n.mu.Lock()
	n.faults[kind]++
	n.mu.Unlock()
}

// counts returns the faults injected by kind, and the worker kills.
func (n *nemesis) counts() (map[string]int, []Kill) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]int, len(n.faults))
	for k, v := range n.faults {
		out[k] = v
	}
	return out, append([]Kill(nil), n.kills...)
}
