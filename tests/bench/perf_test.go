package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/tests/bench/plainsdk"
)

// turnsRun is plainsdk's loop for tulip: a refund a turn (by tool), then
// an answer.
func turnsRun(turns int, tool string) scenario.Run {
	var ts []scenario.Turn
	for turn := 1; turn <= turns; turn++ {
		calls, _ := plainsdk.TurnModel(context.Background(), turn, turns)
		calls[0].Name = tool
		ts = append(ts, scenario.Turn{ToolCalls: calls})
	}
	done := "done"
	return scenario.Run{Turns: append(ts, scenario.Turn{Text: &done})}
}

// sameCallRun is one response of n identical refunds: the first runs, the
// rest are served from the log.
func sameCallRun(n int) scenario.Run {
	calls := make([]threadstate.ToolCall, n)
	for i := range calls {
		calls[i] = threadstate.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "issue_refund", Arguments: `{"order_id": "ord-1", "amount": 120.0}`}
	}
	done := "done"
	return scenario.Run{Turns: []scenario.Turn{{ToolCalls: calls}, {Text: &done}}}
}

// perfEnv is a server with a tulip worker (one model per scenario) and a
// plain worker, each on its own task queue.
type perfEnv struct {
	c       client.Client
	tq, ptq string
	// asks counts the client's describes and visibility listings: what
	// waiting clients ask the server besides their results' long polls.
	asks atomic.Int64
}

// countAsks is the client's interceptor that counts asks.
func (e *perfEnv) countAsks(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch method {
	case workflowservice.WorkflowService_DescribeWorkflowExecution_FullMethodName, workflowservice.WorkflowService_ListWorkflowExecutions_FullMethodName:
		e.asks.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func newPerfEnv(b *testing.B, models map[string]activities.Model, workerOpts sdkworker.Options) *perfEnv {
	srv, err := devserver.Start(devserver.Options{})
	require.NoError(b, err)
	b.Cleanup(srv.Stop)
	e := &perfEnv{}
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: quiet(),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(e.countAsks)}}})
	require.NoError(b, err)
	b.Cleanup(c.Close)
	e.c, e.tq, e.ptq = c, fmt.Sprintf("bench-tulip-%d", time.Now().UnixNano()), fmt.Sprintf("bench-plain-%d", time.Now().UnixNano())
	// refund_local: plain.Tool's body as a tool declared Local.
	local, err := activities.NewTool(protocol.ToolSpec{Name: "refund_local", Idempotent: true, Local: true},
		func(ctx context.Context, args map[string]any) (map[string]any, error) {
			args["refund_id"] = "rf-1"
			return args, nil
		})
	require.NoError(b, err)
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: append(demo.NewToolbox().Tools(), local), Hooks: demo.Hooks(), Models: models})
	require.NoError(b, err)
	opts := workerOpts
	opts.Plugins = []sdkworker.Plugin{plugin}
	w := sdkworker.New(c, e.tq, opts)
	require.NoError(b, w.Start())
	b.Cleanup(w.Stop)
	pw := sdkworker.New(c, e.ptq, workerOpts)
	plainsdk.Register(pw)
	require.NoError(b, pw.Start())
	b.Cleanup(pw.Stop)
	return e
}

func (e *perfEnv) history(b *testing.B, id, runID string) *historypb.History {
	hist := &historypb.History{}
	it := e.c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(b, err)
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

func (e *perfEnv) tulip(b *testing.B, model string, turns int, sequential bool) *historypb.History {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h, res, err := runclient.Run(ctx, e.c, runclient.RunOptions{TaskQueue: e.tq, Model: model, MaxTurns: turns + 2, SequentialCalls: sequential})
	require.NoError(b, err)
	require.Equal(b, agentrun.StatusCompleted, res.Status)
	return e.history(b, h.WorkflowID, h.RunID)
}

// tulipGet is tulip for a client that waits for the run's result alone.
func (e *perfEnv) tulipGet(b *testing.B, model string, turns int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h, err := runclient.Start(ctx, e.c, runclient.RunOptions{TaskQueue: e.tq, Model: model, MaxTurns: turns + 2})
	require.NoError(b, err)
	var res agentrun.RunResult
	require.NoError(b, e.c.GetWorkflow(ctx, h.WorkflowID, h.RunID).Get(ctx, &res))
	require.Equal(b, agentrun.StatusCompleted, res.Status)
	e.history(b, h.WorkflowID, h.RunID)
}

func (e *perfEnv) plain(b *testing.B, turns int) *historypb.History {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: e.ptq}, plainsdk.TurnsWorkflow, turns)
	require.NoError(b, err)
	require.NoError(b, run.Get(ctx, nil))
	return e.history(b, run.GetID(), run.GetRunID())
}

// medianTurnGap is the median time between consecutive completions of
// the model activity (server clock): one turn, its tool call included,
// whether that call is an activity, a local activity or plain.
func medianTurnGap(hist *historypb.History) time.Duration {
	model := map[int64]bool{}
	var done []time.Time
	for _, e := range hist.Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			name := a.GetActivityType().GetName()
			model[e.GetEventId()] = name == protocol.ModelActivity || name == plainsdk.ModelActivity
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && model[a.GetScheduledEventId()] {
			done = append(done, e.GetEventTime().AsTime())
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(done); i++ {
		gaps = append(gaps, done[i].Sub(done[i-1]))
	}
	return median(gaps)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// servedTask is how long the workflow task that served n-1 identical calls
// took (server clock, started to completed), per served call: an upper
// bound of a served call's cost (the task's round trip included).
func servedTask(hist *historypb.History, n int) time.Duration {
	evs := hist.Events
	tools := 0
	for i, e := range evs {
		if e.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			continue
		}
		tools++
		if tools != 2 { // the model's response, then the one executed call
			continue
		}
		var started time.Time
		for _, f := range evs[i+1:] {
			switch f.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				started = f.GetEventTime().AsTime()
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				return f.GetEventTime().AsTime().Sub(started) / time.Duration(n-1)
			}
		}
	}
	return 0
}

// BenchmarkCallLatency compares one tool call in tulip with the same call
// as a plain SDK activity, on the embedded server: 20 turns of one call
// each, the time from one model completion to the next (median, server
// clock: the turn, its call included), tulip vs an agent loop written
// plainly, and with the tool declared Local (a local activity) vs not; and
// a call served from the log (50 identical calls in one response, run one
// after another: the first runs, the workflow task after it serves the
// other 49) vs a turn with an executed one.
//
//	go test ./tests/bench -run '^$' -bench CallLatency -benchtime 5x
func BenchmarkCallLatency(b *testing.B) {
	const turns, same = 20, 50
	e := newPerfEnv(b, map[string]activities.Model{"turns": turnsRun(turns, "issue_refund").Model(),
		"local": turnsRun(turns, "refund_local").Model(), "same": sameCallRun(same).Model()}, sdkworker.Options{})
	e.tulip(b, "turns", turns, true) // warm-up
	e.tulip(b, "local", turns, true)
	e.plain(b, turns)
	var tulip, local, plain, served []time.Duration
	i := 0
	for b.Loop() {
		arms := []func(){
			func() { tulip = append(tulip, medianTurnGap(e.tulip(b, "turns", turns, true))) },
			func() { local = append(local, medianTurnGap(e.tulip(b, "local", turns, true))) },
			func() { plain = append(plain, medianTurnGap(e.plain(b, turns))) },
			func() { served = append(served, servedTask(e.tulip(b, "same", 1, true), same)) },
		}
		for k := range arms {
			arms[(i+k)%len(arms)]()
		}
		i++
	}
	t, p, s, l := median(tulip), median(plain), median(served), median(local)
	b.ReportMetric(float64(l.Microseconds())/1000, "ms/turn-local")
	b.ReportMetric(float64(l)/float64(t), "local/activity")
	b.ReportMetric(float64(t.Microseconds())/1000, "ms/turn-executed")
	b.ReportMetric(float64(p.Microseconds())/1000, "ms/turn-plain-activity")
	b.ReportMetric(float64(s.Microseconds())/1000, "ms/call-served")
	b.ReportMetric(float64(t)/float64(p), "executed/plain-activity")
	b.ReportMetric(float64(s)/float64(t), "served/executed")
}

// BenchmarkThroughput runs 50 agent runs at once on one worker (10 turns
// of one call each, then an answer), with tulip and as the same loop
// written plainly with the SDK, and reports turns per second of each and
// their ratio. tulip's runs are waited for three ways, each its own arm:
// with runclient.Run, which sees interrupts (the runs it waits on listed
// together, each described every few seconds), the same without that
// watch (runclient.WatchInterrupts off: a describe a run an ask, backing
// off to one a second), and as the plain loop's are, by the run's result
// alone (runclient.Start, then the SDK's Get), as a client that needs no
// interrupts waits: what the workflow and the worker cost, apart from the
// client's asks. asks/run counts a run's describes and listings.
//
//	go test ./tests/bench -run '^$' -bench Throughput -benchtime 5x
func BenchmarkThroughput(b *testing.B) {
	const runs, turns = 50, 10
	e := newPerfEnv(b, map[string]activities.Model{"turns": turnsRun(turns, "issue_refund").Model()}, sdkworker.Options{})
	batch := func(one func()) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range runs {
			wg.Go(one)
		}
		wg.Wait()
		return time.Since(start)
	}
	arms := []struct {
		name  string
		batch func() time.Duration
	}{
		{"tulip", func() time.Duration { return batch(func() { e.tulip(b, "turns", turns, false) }) }},
		{"tulip-unwatched", func() time.Duration {
			runclient.WatchInterrupts = false
			defer func() { runclient.WatchInterrupts = true }()
			return batch(func() { e.tulip(b, "turns", turns, false) })
		}},
		{"tulip-get", func() time.Duration { return batch(func() { e.tulipGet(b, "turns", turns) }) }},
		{"plain-sdk", func() time.Duration { return batch(func() { e.plain(b, turns) }) }},
	}
	for _, a := range arms { // warm-up
		a.batch()
	}
	spent := make([]time.Duration, len(arms))
	each := make([][]time.Duration, len(arms))
	asks := make([]int64, len(arms))
	i := 0
	for b.Loop() {
		for k := range arms { // each iteration starts with the next arm
			j := (i + k) % len(arms)
			before := e.asks.Load()
			t := arms[j].batch()
			asks[j] += e.asks.Load() - before
			spent[j] += t
			each[j] = append(each[j], t)
		}
		i++
	}
	done := float64(runs * (turns + 1) * i)
	plain := len(arms) - 1
	for j, a := range arms {
		b.ReportMetric(done/spent[j].Seconds(), "turns/s-"+a.name)
		b.ReportMetric(float64(asks[j])/float64(runs*i), "asks/run-"+a.name)
	}
	// Each iteration is a block: the plain loop's time over an arm's is
	// the arm's turns per second over the plain loop's.
	for j, a := range arms[:plain] {
		blocks := spread(blockRatios(each[plain], each[j], i))
		ratio := spent[plain].Seconds() / spent[j].Seconds()
		b.ReportMetric(ratio, a.name+"/plain-sdk")
		b.ReportMetric(blocks.median(), a.name+"/plain-sdk-median")
		b.Logf("%s/plain-sdk %.3f, %v; goal >= %.1f: %s", a.name, ratio, blocks, throughputGoal, verdict(blocks.median() >= throughputGoal))
	}
}
