// Package scale runs agent runs at real size on the embedded server, with
// the worker's sticky cache on (as in production): a 1,000-turn run with
// 8 KB arguments through continue-as-new, megabyte payloads through the
// blob store, and what each writes to history.
package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

var server *devserver.Server

func TestMain(m *testing.M) {
	srv, err := devserver.Start(devserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded server:", err)
		os.Exit(1)
	}
	server = srv
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

func quiet() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// setup dials the server with external storage over blobs (nil: none) and
// encryption with keys (nil: none), and runs a worker with models.
func setup(t testing.TB, blobs blobstore.Store, keys *codec.Keyring, models map[string]activities.Model) (client.Client, string, *demo.Toolbox) {
	t.Helper()
	opts := client.Options{HostPort: server.Address(), Logger: quiet()}
	if keys != nil {
		keys.ClientOptions(&opts)
	}
	wopts := workerplugin.Options{Hooks: demo.Hooks(), Models: models}
	if blobs != nil {
		opts.ExternalStorage = blobstore.ExternalStorage(blobs, 64<<10)
		wopts.PayloadLimit = -1
	}
	c, err := client.Dial(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tb := demo.NewToolbox()
	wopts.Tools = tb.Tools()
	plugin, err := workerplugin.NewPlugin(wopts)
	require.NoError(t, err)
	tq := fmt.Sprintf("scale-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c, tq, tb
}

// padded is a model that makes one audit_append call per turn, with
// arguments of about size bytes, for turns turns, then answers.
func padded(turns, size int) activities.Model {
	pad := strings.Repeat("x", size)
	return activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if req.Turn > turns {
			return activities.ModelResponse{Text: "done"}, nil
		}
		return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: fmt.Sprintf("c%d", req.Turn), Name: "audit_append",
			Arguments: fmt.Sprintf(`{"turn": %d, "pad": "%s"}`, req.Turn, pad)}}}, nil
	})
}

// chain returns the histories of every run of workflowID's newest
// continue-as-new chain, oldest first.
func chain(t testing.TB, c client.Client, workflowID string) []*historypb.History {
	t.Helper()
	ctx := context.Background()
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	require.NoError(t, err)
	var out []*historypb.History
	for runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); runID != ""; {
		h := &historypb.History{}
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, ev)
		}
		out = append([]*historypb.History{h}, out...)
		runID = h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	return out
}

// turnBytes attributes each event's size to the model turn it belongs to
// (turn k starts when the k-th model call is scheduled).
func turnBytes(hs []*historypb.History) (perTurn []int, total int) {
	perTurn = []int{0}
	for _, h := range hs {
		for _, ev := range h.Events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == protocol.ModelActivity {
				perTurn = append(perTurn, 0)
			}
			n := proto.Size(ev)
			perTurn[len(perTurn)-1] += n
			total += n
		}
	}
	return perTurn, total
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// longRunStats is what a long run measured.
type longRunStats struct {
	elapsed              time.Duration
	runs, continued      int
	history, blobs       int64
	content, early, late int
	replayFirst          time.Duration // replaying the chain's first run
	replayLast           time.Duration // replaying its last run (a cache miss late in the thread)
}

func (s longRunStats) lateOverEarly() float64 { return float64(s.late) / float64(s.early) }
func (s longRunStats) storedOverContent() float64 {
	return float64(s.history+s.blobs) / float64(s.content)
}

// longRunOptions: the blob store (nil: none, a plain server's limits), the
// codec keys (nil: none), and a thread (its next run then refunds... an
// earlier call again: served).
type longRunOptions struct {
	blobs  *blobstore.Memory
	keys   *codec.Keyring
	thread bool
}

// longRun plays a run of turns turns, one audit_append call of size bytes
// each, and measures it.
func longRun(t testing.TB, turns, size int, o longRunOptions) longRunStats {
	var store blobstore.Store
	if o.blobs != nil {
		store = o.blobs
	}
	again := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if req.Turn > 1 {
			return activities.ModelResponse{Text: "done"}, nil
		}
		return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "again", Name: "audit_append",
			Arguments: fmt.Sprintf(`{"turn": %d, "pad": "%s"}`, turns/2, strings.Repeat("x", size))}}}, nil
	})
	c, tq, tb := setup(t, store, o.keys, map[string]activities.Model{"m": padded(turns, size), "again": again})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	opts := runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "append", MaxTurns: turns + 1}
	if o.thread {
		opts.ThreadID = fmt.Sprintf("long-%d", time.Now().UnixNano())
	}
	h, res, err := runclient.Run(ctx, c, opts)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	st := longRunStats{elapsed: time.Since(start), continued: res.ContinuedAsNew}
	if o.blobs != nil {
		_, st.blobs = o.blobs.Stats() // before reading the log: a query's answer is stored too
	}
	assert.Equal(t, turns, tb.Invocations()["audit_append"])
	trace, err := runclient.Trace(ctx, c, h, res)
	require.NoError(t, err)
	require.Len(t, trace, turns)
	require.Contains(t, string(trace[turns/2].Arguments), strings.Repeat("x", size), "a line the chain's middle run holds, read back whole")
	recs, err := runclient.Log(ctx, c, h)
	require.NoError(t, err)
	require.Len(t, recs, turns, "every record")
	for i, r := range recs {
		require.Equal(t, fmt.Sprintf("c%d", i+1), r.CallID)
	}
	hs := chain(t, c, h.WorkflowID)
	st.runs = len(hs)
	perTurn, hist := turnBytes(hs)
	require.Len(t, perTurn, turns+2, "turns 1..N and the final answer's")
	st.history = int64(hist)
	st.early, st.late = sum(perTurn[1:101]), sum(perTurn[turns-99:turns+1])
	st.content = len("append")
	for _, l := range trace {
		st.content += size + len(l.Result) // the model's arguments, the tool's result
	}
	st.replayFirst, st.replayLast = replayCost(t, store, o.keys, hs[0], hs[len(hs)-1])
	if o.thread {
		// The thread's next run repeats turn N/2's call: the record, held
		// by a run of the chain, serves it.
		_, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "again", ThreadID: opts.ThreadID, Message: "again"})
		require.NoError(t, err)
		require.Len(t, res.Trace, 1)
		assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome, "the thread's next run serves an earlier call")
		assert.Equal(t, turns, tb.Invocations()["audit_append"])
	}
	return st
}

// replayCost times replaying two histories with the plugin, interleaved,
// after a warm-up; the medians of five each.
func replayCost(t testing.TB, blobs blobstore.Store, keys *codec.Keyring, a, b *historypb.History) (time.Duration, time.Duration) {
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks()})
	require.NoError(t, err)
	// No deadlock detection: on a machine busy with other tests a step of
	// replay may wait for a core longer than its 1 s.
	ro := sdkworker.WorkflowReplayerOptions{Plugins: []sdkworker.Plugin{plugin}, DisableDeadlockDetection: true}
	if blobs != nil {
		ro.ExternalStorage = blobstore.ExternalStorage(blobs, 64<<10)
	}
	if keys != nil {
		ro.DataConverter, ro.FailureConverter = keys.Converters(nil)
	}
	r, err := sdkworker.NewWorkflowReplayerWithOptions(ro)
	require.NoError(t, err)
	timed := func(h *historypb.History) time.Duration {
		start := time.Now()
		require.NoError(t, r.ReplayWorkflowHistory(quiet(), h))
		return time.Since(start)
	}
	timed(a)
	timed(b)
	var ta, tb []time.Duration
	for range 5 {
		ta = append(ta, timed(a))
		tb = append(tb, timed(b))
	}
	slices.Sort(ta)
	slices.Sort(tb)
	return ta[2], tb[2]
}

func (s longRunStats) log(t testing.TB, what string) {
	t.Logf("%s: %s, %d runs; history %.1f MB (turns 1-100: %d B, 901-1000: %d B, ratio %.2f); blobs %.1f MB; content %.1f MB; stored/content %.2f; replay first run %s, last run %s",
		what, s.elapsed.Round(time.Second), s.runs, float64(s.history)/1e6, s.early, s.late, s.lateOverEarly(),
		float64(s.blobs)/1e6, float64(s.content)/1e6, s.storedOverContent(), s.replayFirst.Round(time.Millisecond), s.replayLast.Round(time.Millisecond))
}

// A 1,000-turn run with 8 KB arguments completes with every record; its
// history grows with what is new (the cost of a late turn is that of an
// early one), each byte of content is carried once (all it stores is at
// most 2.5 times its content: the model's arguments are also the tool's
// input), and replaying its last run (a worker's cache miss late in the
// thread) costs what replaying its first did: bounded by continue-as-new.
func TestLongRun(t *testing.T) {
	st := longRun(t, 1000, 8<<10, longRunOptions{blobs: &blobstore.Memory{}})
	st.log(t, "1,000 turns x 8 KB, blob store")
	assert.GreaterOrEqual(t, st.continued, 3, "continued as new")
	assert.LessOrEqual(t, st.lateOverEarly(), 2.0, "history per turn does not grow with the conversation")
	assert.LessOrEqual(t, st.storedOverContent(), 2.5, "history + blobs at most 2.5x the content")
}

// The same 1,000-turn run on a thread, against a plain server: no blob
// store, the server's 2 MiB payload limit. It completes (its state goes by
// reference: no payload holds the conversation), and the thread's next run
// is served an earlier call.
func TestLongRunWithoutBlobStore(t *testing.T) {
	st := longRun(t, 1000, 8<<10, longRunOptions{thread: true})
	st.log(t, "1,000 turns x 8 KB on a thread, no blob store")
	assert.GreaterOrEqual(t, st.continued, 3, "continued as new")
	assert.LessOrEqual(t, st.lateOverEarly(), 2.0, "history per turn does not grow with the conversation")
	assert.LessOrEqual(t, st.storedOverContent(), 2.5, "history at most 2.5x the content")
}

// BenchmarkLongRun reports the long run's ratios, each against its
// baseline in the same run (stored/content with a blob store and, on a
// thread, without one):
//
//	go test ./tests/scale -run '^$' -bench LongRun -benchtime 1x
func BenchmarkLongRun(b *testing.B) {
	for range b.N {
		st := longRun(b, 1000, 8<<10, longRunOptions{blobs: &blobstore.Memory{}})
		plain := longRun(b, 1000, 8<<10, longRunOptions{thread: true})
		b.ReportMetric(st.lateOverEarly(), "late/early-turn-bytes")
		b.ReportMetric(st.storedOverContent(), "stored/content")
		b.ReportMetric(plain.storedOverContent(), "stored/content-no-store")
		b.ReportMetric(float64(st.replayLast)/float64(st.replayFirst), "replay-last/first")
		b.ReportMetric(float64(st.runs), "runs")
	}
}

// 15 calls with 100 KB arguments complete: the large result and state go
// to the blob store, history keeps claims.
func TestLargeArguments(t *testing.T) {
	blobs := &blobstore.Memory{}
	c, tq, tb := setup(t, blobs, nil, map[string]activities.Model{"m": padded(15, 100<<10)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	thread := fmt.Sprintf("big-%d", time.Now().UnixNano())
	_, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "append"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, 15, tb.Invocations()["audit_append"])
	n, bytes := blobs.Stats()
	assert.Greater(t, n, 0)
	t.Logf("15 x 100 KB: %d blobs, %.1f MB", n, float64(bytes)/1e6)
	recs, err := runclient.ThreadLog(ctx, c, thread, "")
	require.NoError(t, err)
	assert.Len(t, recs, 15)
}

// The same long run with every payload encrypted: the history still grows
// only with what is new, and all it stores stays a small multiple of its
// content (encrypted segments that did not change are stored once).
func TestLongRunEncrypted(t *testing.T) {
	keys, err := codec.NewKeyring(codec.Key{ID: "scale", Secret: bytes.Repeat([]byte{5}, codec.KeySize)})
	require.NoError(t, err)
	st := longRun(t, 1000, 8<<10, longRunOptions{blobs: &blobstore.Memory{}, keys: keys})
	t.Logf("encrypted, 1,000 turns x 8 KB: %s, %d runs; history %.1f MB (late/early %.2f); blobs %.1f MB; stored/content %.2f; replay first run %s, last run %s",
		st.elapsed.Round(time.Second), st.runs, float64(st.history)/1e6, st.lateOverEarly(),
		float64(st.blobs)/1e6, st.storedOverContent(), st.replayFirst.Round(time.Millisecond), st.replayLast.Round(time.Millisecond))
	assert.LessOrEqual(t, st.lateOverEarly(), 2.0, "history per turn does not grow with the conversation")
	assert.LessOrEqual(t, st.storedOverContent(), 5.0, "history + blobs at most 5x the content")
}
