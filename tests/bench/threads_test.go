package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/tests/bench/plainsdk"
)

// BenchmarkOpenThreads is a company's worker: one worker process
// (tests/bench/memworker) holds TULIP_BENCH_THREADS (10,000) threads open,
// each a run that made a refund and waits for an approval (tulip's, held
// by a hook) or a signal (the same loop written plainly), and then
// TULIP_BENCH_ACTIVE (1,000) of tulip's are approved at once: each runs
// the held call, a call served from its log (its first refund again) and
// a new refund, and answers. Reported: the resident set and heap each
// open thread adds, tulip's against the plain loop's; the p50 and p99 of
// a served and an executed call while the 1,000 go on (from the model's
// answer asking for the call to the next model call's start); the
// server's persistence requests per turn (a turn: one model call), its
// writes apart, from the server's own metrics; and how long the 1,000
// took.
//
//	go test ./tests/bench -run '^$' -bench OpenThreads -benchtime 1x -timeout 60m
func BenchmarkOpenThreads(b *testing.B) {
	threads, active := envInt(b, "TULIP_BENCH_THREADS", 10000), envInt(b, "TULIP_BENCH_ACTIVE", 1000)
	active = min(active, threads)
	port, err := devserver.FreePort("127.0.0.1")
	require.NoError(b, err)
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	srv, err := devserver.Start(devserver.Options{MetricsAddress: metricsAddr})
	require.NoError(b, err)
	b.Cleanup(srv.Stop)
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: quiet()})
	require.NoError(b, err)
	b.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	const parallel = 64 // starts in flight at once
	for i := 0; i < b.N; i++ {
		tq := fmt.Sprintf("bench-threads-%d", time.Now().UnixNano())
		w := startMemWorker(b, srv.Address(), tq, 1, "-after", "-cache", strconv.Itoa(2*threads+100))
		warmUp(b, ctx, c, tq, 1, 10) // with -after, a run unheld takes 5 model calls

		rss0, heap0, _, _ := w.mem(b)
		start := time.Now()
		require.NoError(b, inBatches(threads, parallel, func(k int) error {
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-plain-%d", tq, k), TaskQueue: tq + "-plain"}, plainsdk.HeldWorkflow, 1)
			if err != nil {
				return err
			}
			for {
				v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), plainsdk.TurnsQuery)
				var done int
				if err == nil && v.Get(&done) == nil && done == 1 {
					return nil
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				time.Sleep(200 * time.Millisecond)
			}
		}))
		plainHold := time.Since(start)
		rss1, heap1, _, _ := w.mem(b)
		start = time.Now()
		ids := make([]string, threads)
		require.NoError(b, inBatches(threads, parallel, func(k int) error {
			h, err := holdRun(ctx, c, fmt.Sprintf("%s-tulip-%d", tq, k), tq, 10)
			ids[k] = h.WorkflowID
			return err
		}))
		tulipHold := time.Since(start)
		rss2, heap2, _, _ := w.mem(b)

		// The active ones: approved at once, each to its answer.
		before := persistence(b, metricsAddr)
		start = time.Now()
		require.NoError(b, inBatches(active, active, func(k int) error {
			if _, err := runclient.Resume(ctx, c, ids[k], agentrun.ResumeInput{Answer: "approved", PerformDangling: true}); err != nil {
				return err
			}
			res, err := runclient.Await(ctx, c, runclient.Handle{WorkflowID: ids[k]}, "")
			if err != nil {
				return err
			}
			if res.Status != agentrun.StatusCompleted {
				return fmt.Errorf("run %s: %s after its approval", ids[k], res.Status)
			}
			return nil
		}))
		activeTook := time.Since(start)
		after := persistence(b, metricsAddr)
		_, err = io.WriteString(w.in, "lat\n")
		require.NoError(b, err)
		line, err := w.out.ReadString('\n')
		require.NoError(b, err)
		var sp50, sp99, ep50, ep99 float64
		var n int
		_, err = fmt.Sscanf(line, "served %g %g executed %g %g n %d", &sp50, &sp99, &ep50, &ep99, &n)
		require.NoError(b, err, "%q", line)
		require.Equal(b, active+1, n, "every active run (and the warm-up run) made its served and its executed call")
		// What one thread keeps: its run's history (the held part and what
		// its approval added) and its state (what a thread store holds).
		hist := &historypb.History{}
		it := c.GetWorkflowHistory(ctx, ids[0], "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(b, err)
			hist.Events = append(hist.Events, ev)
		}
		v, err := c.QueryWorkflow(ctx, ids[0], "", agentrun.QueryState)
		require.NoError(b, err)
		var state json.RawMessage
		require.NoError(b, v.Get(&state))
		_ = w.cmd.Process.Kill()

		const turnsEach = 3 // after the approval: the held call's turn, the served call's, the executed call's
		turns := float64(active * turnsEach)
		perTulip, perPlain := (rss2-rss1)/float64(threads), (rss1-rss0)/float64(threads)
		b.Logf("%d open threads: %.1f KB resident a tulip thread vs %.1f KB a plain loop's (tulip/plain-sdk %.2f); heap %.1f KB vs %.1f KB; held in %s vs %s",
			threads, perTulip/1024, perPlain/1024, perTulip/perPlain, (heap2-heap1)/float64(threads)/1024, (heap1-heap0)/float64(threads)/1024,
			tulipHold.Round(time.Second), plainHold.Round(time.Second))
		b.Logf("%d active at once: served call p50 %.1f ms p99 %.1f ms; executed call p50 %.1f ms p99 %.1f ms; %.0f turns in %s (%.0f turns/s)",
			active, sp50, sp99, ep50, ep99, turns, activeTook.Round(time.Millisecond), turns/activeTook.Seconds())
		b.Logf("a thread's run: %d history events, %d bytes; its state %d bytes", len(hist.Events), proto.Size(hist), len(state))
		b.ReportMetric(float64(proto.Size(hist)), "history-bytes/run")
		b.ReportMetric(float64(len(state)), "state-bytes/thread")
		b.Logf("persistence per turn: %.1f requests, %.1f writes (%s)", (after.total-before.total)/turns, (after.writes-before.writes)/turns, after.top(before, turns))
		b.ReportMetric(perTulip, "rss-bytes/thread-tulip")
		b.ReportMetric(perPlain, "rss-bytes/thread-plain-sdk")
		b.ReportMetric(perTulip/perPlain, "tulip/plain-sdk")
		b.ReportMetric(sp50, "served-p50-ms")
		b.ReportMetric(sp99, "served-p99-ms")
		b.ReportMetric(ep50, "executed-p50-ms")
		b.ReportMetric(ep99, "executed-p99-ms")
		b.ReportMetric((after.writes-before.writes)/turns, "persistence-writes/turn")
		b.ReportMetric((after.total-before.total)/turns, "persistence-requests/turn")
	}
	b.ReportMetric(0, "ns/op")
}

// inBatches calls f(0..n-1), at most parallel at once, and keeps the
// first error.
func inBatches(n, parallel int, f func(k int) error) error {
	var g group
	sem := make(chan struct{}, parallel)
	for k := range n {
		sem <- struct{}{}
		g.Go(func() error {
			defer func() { <-sem }()
			return f(k)
		})
	}
	return g.Wait()
}

// persistenceCounts are the server's persistence requests so far, by
// operation.
type persistenceCounts struct {
	total, writes float64
	byOp          map[string]float64
}

// writeOps are the prefixes of the persistence operations that write.
var writeOps = []string{"Create", "Update", "Append", "Delete", "Complete", "RangeComplete", "Upsert", "Put", "Set", "Insert", "Conflict"}

// persistence scrapes the server's persistence_requests counters.
func persistence(b *testing.B, addr string) persistenceCounts {
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(b, err)
	defer resp.Body.Close()
	out := persistenceCounts{byOp: map[string]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "persistence_requests") {
			continue
		}
		_, rest, ok := strings.Cut(line, `operation="`)
		if !ok {
			continue
		}
		op, _, _ := strings.Cut(rest, `"`)
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		out.byOp[op] += v
		out.total += v
		for _, p := range writeOps {
			if strings.HasPrefix(op, p) {
				out.writes += v
				break
			}
		}
	}
	require.NoError(b, sc.Err())
	require.NotZero(b, out.total, "sanity: the server reports its persistence requests")
	return out
}

// top names the operations that grew most since before, per turn.
func (p persistenceCounts) top(before persistenceCounts, turns float64) string {
	type op struct {
		name string
		n    float64
	}
	var ops []op
	for name, v := range p.byOp {
		if d := v - before.byOp[name]; d > 0 {
			ops = append(ops, op{name, d / turns})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].n > ops[j].n })
	var parts []string
	for _, o := range ops[:min(len(ops), 8)] {
		parts = append(parts, fmt.Sprintf("%s %.2f", o.name, o.n))
	}
	return strings.Join(parts, ", ")
}
