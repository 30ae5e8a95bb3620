// Package bench holds the benchmarks that need a Temporal server: replay
// cost of the plugin, and per-call latency of the embedded server tuned
// versus its stock dynamic config. Each reports its ratio against a
// baseline measured in the same run.
//
//	go test ./tests/bench -run '^$' -bench . -benchtime 20x
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/tests/bench/plainsdk"
)

func quiet() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// sequentialRun is one model response with n distinct refunds, then a final
// answer: n executed calls (one after another with SequentialCalls),
// nothing served.
func sequentialRun(n int) scenario.Run {
	calls := make([]threadstate.ToolCall, n)
	for i := range calls {
		calls[i] = threadstate.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "issue_refund",
			Arguments: fmt.Sprintf(`{"order_id": "ord-%d", "amount": 120.0}`, i)}
	}
	done := "done"
	return scenario.Run{Turns: []scenario.Turn{{ToolCalls: calls}, {Text: &done}}}
}

// record runs run on srv and returns its history.
func record(b *testing.B, srv *devserver.Server, run scenario.Run, sequential bool) *historypb.History {
	b.Helper()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: quiet()})
	require.NoError(b, err)
	defer c.Close()
	tq := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	// PayloadLimit -1: one response of 1,000 calls passes the payload
	// budget's worst case (every call's record and line at their bounds)
	// on a plain server, though its state stays far below it; this
	// measures replay, not that bound.
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"m": run.Model()}, PayloadLimit: -1})
	require.NoError(b, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(b, w.Start())
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "m", MaxTurns: 4, SequentialCalls: sequential})
	require.NoError(b, err)
	require.Equal(b, agentrun.StatusCompleted, res.Status)
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, h.WorkflowID, h.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(b, err)
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

// plainAgent is the same agent loop written plainly with the SDK, no tulip
// at all: a model turn that returns n calls, the n tool activities at
// once, a final model turn that is sent their results (what any agent
// loop sends its model: without them the model never sees what the tools
// did; tulip's second model call sends the same messages, its model
// activity holding the earlier ones). It is the baseline a user would
// compare tulip against.
func plainAgent(ctx wf.Context, n int) (int, error) {
	ao := wf.WithActivityOptions(ctx, wf.ActivityOptions{StartToCloseTimeout: time.Minute})
	var calls []threadstate.ToolCall
	if err := wf.ExecuteActivity(ao, "plain.Model", 1, n, nil).Get(ctx, &calls); err != nil {
		return 0, err
	}
	futures := make([]wf.Future, len(calls))
	for i, c := range calls {
		futures[i] = wf.ExecuteActivity(ao, plainsdk.ToolActivity, c.Name, c.Arguments)
	}
	results := make([]threadstate.Message, len(calls))
	for i, f := range futures {
		var out json.RawMessage
		if err := f.Get(ctx, &out); err != nil {
			return 0, err
		}
		results[i] = threadstate.Message{Role: "tool", ToolCallID: calls[i].ID, Content: string(out)}
	}
	var none []threadstate.ToolCall
	return len(calls), wf.ExecuteActivity(ao, "plain.Model", 2, n, results).Get(ctx, &none)
}

func plainModel(_ context.Context, turn, n int, _ []threadstate.Message) ([]threadstate.ToolCall, error) {
	if turn > 1 {
		return nil, nil
	}
	return sequentialRun(n).Turns[0].ToolCalls, nil
}

func registerPlain(r interface {
	RegisterWorkflowWithOptions(any, wf.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(plainAgent, wf.RegisterOptions{Name: "bench.PlainAgent"})
}

// recordPlain runs plainAgent with n calls on srv and returns its history.
func recordPlain(b *testing.B, srv *devserver.Server, n int) *historypb.History {
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: quiet()})
	require.NoError(b, err)
	defer c.Close()
	tq := fmt.Sprintf("bench-plain-%d", time.Now().UnixNano())
	w := sdkworker.New(c, tq, sdkworker.Options{})
	registerPlain(w)
	w.RegisterActivityWithOptions(plainModel, activity.RegisterOptions{Name: "plain.Model"})
	w.RegisterActivityWithOptions(plainsdk.Tool, activity.RegisterOptions{Name: plainsdk.ToolActivity})
	require.NoError(b, w.Start())
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: tq}, "bench.PlainAgent", n)
	require.NoError(b, err)
	require.NoError(b, run.Get(ctx, nil))
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(b, err)
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

// BenchmarkReplay replays an N-call history (the calls of one response,
// run at once) with the plugin, and the same
// workflow without the dedup interceptor, and the same agent loop written
// plainly with the SDK (no tulip at all: plainAgent), in the same run.
// The history has no served call, so the first two issue the same commands:
// plugin/without is what the interceptor costs a replay; plugin/plain-sdk
// is everything tulip adds (parsing, keys, hooks, the log, the trace).
// Both histories have the same number of workflow tasks (wft-plugin,
// wft-plain-sdk): a replay makes a pass a task.
//
//	go test ./tests/bench -run '^$' -bench 'Replay$' -benchtime 100x
func BenchmarkReplay(b *testing.B) {
	// Record first, then stop the server so that its background work does
	// not run beside the replays being timed.
	ns := replayNs(b)
	hists, plain := loadReplayHistories(b, ns)
	var recorded []int
	var srv *devserver.Server
	for _, n := range ns {
		if hists[n] != nil {
			continue // read from TULIP_BENCH_REPLAY_HISTORIES
		}
		if srv == nil {
			var err error
			srv, err = devserver.Start(devserver.Options{})
			require.NoError(b, err)
		}
		recorded = append(recorded, n)
		hists[n] = record(b, srv, sequentialRun(n), false)
		// How the calls' completions fell into workflow tasks while it
		// was recorded sets how many passes a replay makes: the plain
		// loop is recorded until its history has as many workflow tasks
		// as tulip's (the closest of a few tries), so that both replay
		// the same shape.
		want := workflowTasks(hists[n])
		for range 8 {
			h := recordPlain(b, srv, n)
			if p := plain[n]; p == nil || abs(workflowTasks(h)-want) < abs(workflowTasks(p)-want) {
				plain[n] = h
			}
			if workflowTasks(plain[n]) == want {
				break
			}
		}
	}
	if srv != nil {
		srv.Stop()
	}
	saveReplayHistories(b, recorded, hists, plain)
	for _, n := range ns {
		hist := hists[n]
		plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks()})
		require.NoError(b, err)
		withPlugin, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{Plugins: []sdkworker.Plugin{plugin}})
		require.NoError(b, err)
		without, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{})
		require.NoError(b, err)
		require.NoError(b, workerplugin.Register(without, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks()}))
		plainReplayer, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{})
		require.NoError(b, err)
		registerPlain(plainReplayer)
		// Alternate the two replayers in one loop (and their order every
		// iteration), so that drift (GC state, CPU frequency, other load)
		// falls on both alike.
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var spent [3]time.Duration
			var each [3][]time.Duration
			var allocs [3]uint64
			var ms runtime.MemStats
			reps := [3]sdkworker.WorkflowReplayer{withPlugin, without, plainReplayer}
			hs := [3]*historypb.History{hist, hist, plain[n]}
			arms := [3]string{"plugin", "without", "plain"}
			for range 3 { // warm-up
				for j := range 3 {
					require.NoError(b, reps[j].ReplayWorkflowHistory(quiet(), hs[j]))
				}
			}
			i := 0
			for b.Loop() {
				for k := range 3 {
					j := (i + k) % 3
					runtime.ReadMemStats(&ms)
					before := ms.TotalAlloc
					start := time.Now()
					var err error
					// The arm's label goes to the goroutines the replay
					// starts: go tool pprof -tagfocus arm=plugin.
					pprof.Do(context.Background(), pprof.Labels("arm", arms[j]), func(context.Context) {
						err = reps[j].ReplayWorkflowHistory(quiet(), hs[j])
					})
					if err != nil {
						b.Fatal(err)
					}
					took := time.Since(start)
					spent[j] += took
					each[j] = append(each[j], took)
					runtime.ReadMemStats(&ms)
					allocs[j] += ms.TotalAlloc - before
				}
				i++
			}
			b.ReportMetric(float64(spent[0].Microseconds())/float64(i)/1000, "ms/replay-plugin")
			b.ReportMetric(float64(spent[1].Microseconds())/float64(i)/1000, "ms/replay-without")
			b.ReportMetric(float64(spent[0])/float64(spent[1]), "plugin/without")
			ratio := float64(spent[0]) / float64(spent[2])
			b.ReportMetric(ratio, "plugin/plain-sdk")
			b.ReportMetric(float64(len(hist.Events)), "events")
			b.ReportMetric(float64(workflowTasks(hist)), "wft-plugin")
			b.ReportMetric(float64(workflowTasks(plain[n])), "wft-plain-sdk")
			b.ReportMetric(float64(allocs[0])/float64(allocs[2]), "alloc-plugin/plain-sdk")
			blocks := spread(blockRatios(each[0], each[2], goalBlocks))
			b.ReportMetric(blocks.median(), "plugin/plain-sdk-median")
			if n == 100 || n == 1000 { // the sizes the goal is set at
				b.Logf("N=%d plugin/plain-sdk %.3f, %v; goal <= %.2f: %s", n, ratio, blocks, replayGoal, verdict(blocks.median() <= replayGoal))
			} else {
				b.Logf("N=%d plugin/plain-sdk %.3f, %v", n, ratio, blocks)
			}
		})
	}
}

// TULIP_BENCH_REPLAY_HISTORIES names a directory that keeps
// BenchmarkReplay's histories: read from it when it holds them (tulip-N.json
// and plain-N.json, the JSON tulip replay reads), else recorded and written
// to it. Two versions of the
// code then replay the same histories: how the calls fell into workflow
// tasks while they were recorded moves the ratio by a few percent.
const replayHistoriesEnv = "TULIP_BENCH_REPLAY_HISTORIES"

func replayHistoryFiles(dir string, n int) (string, string) {
	return filepath.Join(dir, fmt.Sprintf("tulip-%d.json", n)), filepath.Join(dir, fmt.Sprintf("plain-%d.json", n))
}

// loadReplayHistories reads the histories TULIP_BENCH_REPLAY_HISTORIES
// holds for ns (none when it is unset).
func loadReplayHistories(b *testing.B, ns []int) (map[int]*historypb.History, map[int]*historypb.History) {
	hists, plain := map[int]*historypb.History{}, map[int]*historypb.History{}
	dir := os.Getenv(replayHistoriesEnv)
	if dir == "" {
		return hists, plain
	}
	for _, n := range ns {
		tf, pf := replayHistoryFiles(dir, n)
		t, p := readHistory(b, tf), readHistory(b, pf)
		if t != nil && p != nil {
			hists[n], plain[n] = t, p
		}
	}
	return hists, plain
}

// readHistory reads a history file as tulip replay does (nil when there
// is none).
func readHistory(b *testing.B, file string) *historypb.History {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(b, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(b, err, file)
	return h
}

// saveReplayHistories writes the pairs recorded now (ns) to
// TULIP_BENCH_REPLAY_HISTORIES, when it is set: both files of a pair, so
// that a pair read later was recorded together.
func saveReplayHistories(b *testing.B, ns []int, hists, plain map[int]*historypb.History) {
	dir := os.Getenv(replayHistoriesEnv)
	if dir == "" {
		return
	}
	require.NoError(b, os.MkdirAll(dir, 0o755))
	for _, n := range ns {
		tf, pf := replayHistoryFiles(dir, n)
		for file, h := range map[string]*historypb.History{tf: hists[n], pf: plain[n]} {
			data, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(h) // as the checked-in histories
			require.NoError(b, err)
			require.NoError(b, os.WriteFile(file, data, 0o644))
		}
	}
}

// workflowTasks is the number of workflow tasks in hist: the passes a
// replay makes, which depend on how completions batched while it was
// recorded as well as on the workflow.
func workflowTasks(hist *historypb.History) int {
	n := 0
	for _, e := range hist.Events {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			n++
		}
	}
	return n
}

func abs(n int) int { return max(n, -n) }

// replayNs is the numbers of calls BenchmarkReplay replays: 100 and
// 1,000, or TULIP_BENCH_REPLAY_N (say "1,10,100": a run's fixed cost
// against its cost per call).
func replayNs(b *testing.B) []int {
	env := os.Getenv("TULIP_BENCH_REPLAY_N")
	if env == "" {
		return []int{100, 1000}
	}
	var ns []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "TULIP_BENCH_REPLAY_N")
		require.Positive(b, n, "TULIP_BENCH_REPLAY_N")
		ns = append(ns, n)
	}
	return ns
}

// medianCallGap is the median time between consecutive tool completions.
func medianCallGap(hist *historypb.History) time.Duration {
	var done []time.Time
	for _, e := range hist.Events {
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			done = append(done, e.GetEventTime().AsTime())
		}
	}
	// The first and last completions are model turns.
	done = done[1 : len(done)-1]
	gaps := make([]time.Duration, 0, len(done))
	for i := 1; i < len(done); i++ {
		gaps = append(gaps, done[i].Sub(done[i-1]))
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	return gaps[len(gaps)/2]
}

// BenchmarkSequentialCallLatency runs 100 sequential executed calls on the
// embedded server with tulip's tuned dynamic config and with the server's
// defaults, and reports the median per-call latency of each and their
// ratio.
func BenchmarkSequentialCallLatency(b *testing.B) {
	tuned, err := devserver.Start(devserver.Options{})
	require.NoError(b, err)
	defer tuned.Stop()
	stock, err := devserver.Start(devserver.Options{ServerDefaults: true})
	require.NoError(b, err)
	defer stock.Stop()
	run := sequentialRun(100)
	for b.Loop() {
		t := medianCallGap(record(b, tuned, run, true))
		d := medianCallGap(record(b, stock, run, true))
		b.ReportMetric(float64(t.Microseconds())/1000, "ms/call-tuned")
		b.ReportMetric(float64(d.Microseconds())/1000, "ms/call-defaults")
		b.ReportMetric(float64(d)/float64(t), "defaults/tuned")
	}
}
