package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	tulipotel "github.com/tulip-temporal/tulip/otel"
)

// memMetrics is an in-memory client.MetricsHandler: counter sums and
// timer/gauge observation counts by name and sorted tags (some tags in
// counts, every tag but the SDK's in all).
type memMetrics struct {
	mu     *sync.Mutex
	tags   map[string]string
	counts map[string]int64
	all    map[string]int64
}

func newMemMetrics() *memMetrics {
	return &memMetrics{mu: &sync.Mutex{}, tags: map[string]string{}, counts: map[string]int64{}, all: map[string]int64{}}
}

// sdkTags are the tags the SDK adds to every metric.
var sdkTags = map[string]bool{"activity_type": true, "client_name": true, "namespace": true, "task_queue": true,
	"worker_type": true, "workflow_type": true}

// fullKey is name with every tag but the SDK's, sorted.
func (m *memMetrics) fullKey(name string) string {
	var parts []string
	for k, v := range m.tags {
		if !sdkTags[k] {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// allWithPrefix is all's entries whose key starts with prefix.
func (m *memMetrics) allWithPrefix(prefix string) map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for k, v := range m.all {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func (m *memMetrics) key(name string) string {
	var parts []string
	for k, v := range m.tags {
		if v != "" && (k == "tool" || k == "outcome" || k == "relation" || k == "kind" || k == "hook" || k == "reason") {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

func (m *memMetrics) WithTags(t map[string]string) client.MetricsHandler {
	n := &memMetrics{mu: m.mu, tags: map[string]string{}, counts: m.counts, all: m.all}
	for k, v := range m.tags {
		n.tags[k] = v
	}
	for k, v := range t {
		n.tags[k] = v
	}
	return n
}

type memCounter struct {
	m        *memMetrics
	key, all string
}

func (c memCounter) Inc(n int64) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.counts[c.key] += n
	c.m.all[c.all] += n
}
func (c memCounter) Update(float64)       { c.Inc(1) }
func (c memCounter) Record(time.Duration) { c.Inc(1) }

func (m *memMetrics) Counter(name string) client.MetricsCounter {
	return memCounter{m, m.key(name), m.fullKey(name)}
}
func (m *memMetrics) Gauge(name string) client.MetricsGauge {
	return memCounter{m, m.key(name), m.fullKey(name)}
}
func (m *memMetrics) Timer(name string) client.MetricsTimer {
	return memCounter{m, m.key(name), m.fullKey(name)}
}

func (m *memMetrics) get(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[key]
}

func (m *memMetrics) withPrefix(prefix string) map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for k, v := range m.counts {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// A demo-shaped run counts exactly the decisions its trace shows, by tool,
// outcome and relation; served calls are counted as side effects
// prevented. The sticky cache is off in this package, so every workflow
// task replayed the run from its history; a query replays it once more:
// the counts do not move.
func TestMetricsCountDecisions(t *testing.T) {
	mm := newMemMetrics()
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(), MetricsHandler: mm})
	require.NoError(t, err)
	defer c.Close()
	story := demo.RefundStory()
	tq := taskQueue(t.Name())
	tb := demo.NewToolbox()
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: story.Models(tq)})
	thread := threadID(t)
	var trace []agentrun.TraceLine
	var last runclient.Handle
	for i := range story.Runs {
		h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: fmt.Sprintf("scenario:%s:run-%d", tq, i+1), ThreadID: thread, Message: "go"})
		require.NoError(t, err)
		trace = append(trace, res.Trace...)
		last = h
	}
	want := map[string]int64{}
	served := int64(0)
	nearMisses := map[string]int64{}
	for _, l := range trace {
		if l.NearMiss != nil {
			nearMisses[agentrun.MetricNearMisses+"{reason="+string(l.NearMiss.Reason)+",tool="+l.Tool+"}"]++
		}
		parts := []string{"outcome=" + string(l.Outcome)}
		if l.Relation != "" {
			parts = append(parts, "relation="+string(l.Relation))
		}
		parts = append(parts, "tool="+l.Tool)
		sort.Strings(parts)
		want[agentrun.MetricToolCalls+"{"+strings.Join(parts, ",")+"}"]++
		if l.Outcome == agentrun.OutcomeCached {
			served++
		}
	}
	check := func(when string) {
		assert.Equal(t, want, mm.withPrefix(agentrun.MetricToolCalls+"{"), when)
		var gotServed int64
		for _, v := range mm.withPrefix(agentrun.MetricServedCalls + "{") {
			gotServed += v
		}
		assert.Equal(t, served, gotServed, "%s: side effects prevented", when)
		assert.Equal(t, nearMisses, mm.withPrefix(agentrun.MetricNearMisses+"{"), "%s: near misses", when)
	}
	check("after the runs")
	assert.Equal(t, int64(1), nearMisses[agentrun.MetricNearMisses+"{reason=not_idempotent,tool=mint_case_id}"], "the second mint ran: not idempotent")
	assert.Equal(t, int64(4), served)
	assert.Equal(t, int64(tb.Invocations()["issue_refund"]), mm.get(protocol.MetricToolLatency+"{outcome=ok,tool=issue_refund}"), "one timing per body attempt")
	assert.Greater(t, mm.get(agentrun.MetricModelTurnLatency+"{}"), int64(0))

	_, err = runclient.Log(ctxT(t), c, last) // a query: one more replay
	require.NoError(t, err)
	check("after a replay")
}

// One span per decision and per model call, none added by replay: the
// same demo-shaped run with the OpenTelemetry observer and an in-memory
// span exporter; a query (a replay) afterwards adds nothing.
func TestTracingSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	c := dial(t, server.Address())
	story := demo.RefundStory()
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(), Models: story.Models(tq),
		Observer: agentrun.PublicObserver(tulipotel.NewObserver(tp.Tracer("tulip")))})
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: fmt.Sprintf("scenario:%s:run-1", tq), Message: "go"})
	require.NoError(t, err)
	count := func() (decisions, models int, served []tracetest.SpanStub) {
		for _, s := range exp.GetSpans() {
			switch s.Name {
			case "tulip.decision":
				decisions++
				for _, a := range s.Attributes {
					if a.Key == "tulip.outcome" && a.Value.AsString() == "cached" {
						served = append(served, s)
					}
				}
			case "tulip.model":
				models++
			}
		}
		return decisions, models, served
	}
	decisions, models, served := count()
	assert.Equal(t, len(res.Trace), decisions, "one span per decision")
	assert.Equal(t, res.Turns, models, "one span per model call")
	require.NotEmpty(t, served)
	attrs := map[string]string{}
	for _, a := range served[0].Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	assert.Equal(t, "issue_refund", attrs["tulip.tool"])
	assert.Equal(t, "earlier_turn", attrs["tulip.relation"])
	assert.Equal(t, "0", attrs["tulip.served_from"])
	assert.Len(t, attrs["tulip.key_hash"], 16)
	var nearMiss []string // the second mint_case_id ran again: not idempotent
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == "tulip.near_miss.reason" {
				nearMiss = append(nearMiss, a.Value.AsString())
			}
		}
	}
	assert.Equal(t, []string{"not_idempotent"}, nearMiss)
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			assert.NotContains(t, a.Value.Emit(), "ord-4821", "no arguments or results in spans")
		}
	}
	_, err = runclient.Log(ctxT(t), c, h) // a replay
	require.NoError(t, err)
	d2, m2, _ := count()
	assert.Equal(t, decisions, d2, "a replay adds no span")
	assert.Equal(t, models, m2)
}

// panicOnce is an Observer that panics the first time it sees a decision,
// failing that workflow task (retried by Temporal on the same worker), and
// counts the decisions it is given.
type panicOnce struct {
	mu        sync.Mutex
	panicked  bool
	decisions int
}

func (p *panicOnce) Decision(agentrun.Decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.decisions++
	if !p.panicked {
		p.panicked = true
		panic("observer fails once")
	}
}

func (p *panicOnce) ModelCall(agentrun.ModelCall) {}

// A workflow task that fails after its decisions were emitted (here the
// observer panics) is retried, and the retry makes the same decisions
// live: the worker does not emit them again. Counts stay exact.
func TestMetricsOnceWhenATaskIsRetried(t *testing.T) {
	mm := newMemMetrics()
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(), MetricsHandler: mm})
	require.NoError(t, err)
	defer c.Close()
	story := demo.RefundStory()
	tq := taskQueue(t.Name())
	obs := &panicOnce{}
	startWorker(t, c, tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(), Models: story.Models(tq), Observer: obs})
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: fmt.Sprintf("scenario:%s:run-1", tq), Message: "go"})
	require.NoError(t, err)
	require.True(t, obs.panicked)
	failedTasks := 0
	for _, e := range eventTypes(history(t, c, h.WorkflowID, h.RunID)) {
		if e == "WorkflowTaskFailed" {
			failedTasks++
		}
	}
	require.Equal(t, 1, failedTasks, "the observer's panic failed one workflow task")
	var calls int64
	for _, v := range mm.withPrefix(agentrun.MetricToolCalls + "{") {
		calls += v
	}
	assert.Equal(t, int64(len(res.Trace)), calls, "each decision counted once")
	assert.Equal(t, len(res.Trace), obs.decisions, "each decision observed once")
}

// Every tulip metric counts exactly, before and after a replay: a run with
// an interrupt and its resume that continues as new every 2 turns. The
// sticky cache is off in this package, so every workflow task replayed the
// run; a query of each run of the chain replays it once more, and nothing
// moves.
func TestMetricsExactAcrossReplay(t *testing.T) {
	mm := newMemMetrics()
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(), MetricsHandler: mm})
	require.NoError(t, err)
	defer c.Close()
	tb := demo.NewToolbox()
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"m": chainScript().Model()}})
	opts := runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "go", Hooks: []string{"approve_isolate_host"}, ContinueAfterTurns: 2}
	h, res, err := runclient.Run(ctxT(t), c, opts)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "ok", PerformDangling: true})
	require.NoError(t, err)
	res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	trace, err := runclient.Trace(ctxT(t), c, h, res)
	require.NoError(t, err)

	want := map[string]int64{}
	for _, l := range trace {
		parts := []string{"outcome=" + string(l.Outcome), "tool=" + l.Tool}
		if l.Relation != "" {
			parts = append(parts, "relation="+string(l.Relation))
		}
		sort.Strings(parts)
		want[agentrun.MetricToolCalls+"{"+strings.Join(parts, ",")+"}"]++
		if l.Outcome == agentrun.OutcomeCached {
			want[agentrun.MetricServedCalls+"{relation="+string(l.Relation)+",tool="+l.Tool+"}"]++
		}
		if l.NearMiss != nil {
			want[agentrun.MetricNearMisses+"{reason="+string(l.NearMiss.Reason)+",tool="+l.Tool+"}"]++
		}
	}
	for tool, n := range tb.Invocations() {
		if n > 0 {
			want[protocol.MetricToolLatency+"{outcome=ok,tool="+tool+"}"] = int64(n)
		}
	}
	want[protocol.MetricModelLatency+"{outcome=ok}"] = int64(res.Turns)
	want[agentrun.MetricModelTurnLatency+"{}"] = int64(res.Turns)
	want[agentrun.MetricInterruptsOpened+"{hook=approve_isolate_host}"] = 1
	want[agentrun.MetricInterruptsResumed+"{hook=approve_isolate_host}"] = 1
	want[agentrun.MetricContinuedAsNew+"{}"] = int64(res.ContinuedAsNew)
	want[agentrun.MetricStateBytes+"{kind=continue_as_new}"] = int64(res.ContinuedAsNew)
	require.GreaterOrEqual(t, res.ContinuedAsNew, 3)
	got := func() map[string]int64 {
		out := map[string]int64{}
		for k, v := range mm.withPrefix("tulip_") {
			out[k] = v
		}
		return out
	}
	assert.Equal(t, want, got(), "after the run")

	// Replay every run of the chain (a query each).
	desc, err := c.DescribeWorkflowExecution(ctxT(t), h.WorkflowID, "")
	require.NoError(t, err)
	for runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); runID != ""; {
		_, err := c.QueryWorkflow(ctxT(t), h.WorkflowID, runID, agentrun.QueryState)
		require.NoError(t, err)
		hist := history(t, c, h.WorkflowID, runID)
		runID = hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	assert.Equal(t, want, got(), "after replaying every run")
}

// Metric tags are bounded: a tool the model invents is tagged "unknown"
// (its name would be a new series per invention), and an agent the
// worker's MetricAgents does not list is tagged "other" (RunInput.Agent is
// any client's string). The span keeps the invented name, marked
// tulip.tool.unknown.
func TestMetricTagsBounded(t *testing.T) {
	mm := newMemMetrics()
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(), MetricsHandler: mm})
	require.NoError(t, err)
	defer c.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	const invented, agentName = "drop_database_7731", "client-invented-agent-77"
	done := "done"
	script := scenario.Run{Turns: []scenario.Turn{
		turn(call("c1", invented, `{}`), call("c2", "lookup_order", `{"order_id": "ord-1"}`)),
		{Text: &done},
	}}
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Models: map[string]activities.Model{"m": script.Model()},
		MetricAgents: []string{"support"}, Observer: agentrun.PublicObserver(tulipotel.NewObserver(tp.Tracer("tulip")))})
	for _, agentIn := range []string{"", agentName} { // "": the default agent, support
		_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "go", Agent: agentIn})
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusCompleted, res.Status)
		require.Len(t, res.Trace, 2)
		require.Equal(t, agentrun.OutcomeRejected, res.Trace[0].Outcome)
		require.Equal(t, invented, res.Trace[0].Tool)
	}
	got := mm.allWithPrefix("tulip_")
	for k := range got {
		assert.NotContains(t, k, invented, "an invented tool name is no tag value")
		assert.NotContains(t, k, agentName, "an unlisted agent is no tag value")
	}
	calls := mm.allWithPrefix(agentrun.MetricToolCalls + "{")
	assert.Equal(t, map[string]int64{
		agentrun.MetricToolCalls + "{agent=support,outcome=rejected,tool=unknown}":      1,
		agentrun.MetricToolCalls + "{agent=support,outcome=executed,tool=lookup_order}": 1,
		agentrun.MetricToolCalls + "{agent=other,outcome=rejected,tool=unknown}":        1,
		agentrun.MetricToolCalls + "{agent=other,outcome=executed,tool=lookup_order}":   1,
	}, calls)
	assert.Equal(t, int64(2), got[agentrun.MetricModelTurnLatency+"{agent=support,model=m}"])
	assert.Equal(t, int64(2), got[agentrun.MetricModelTurnLatency+"{agent=other,model=m}"])

	var rejected []map[string]string
	for _, s := range exp.GetSpans() {
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		if s.Name == "tulip.decision" && attrs["tulip.outcome"] == "rejected" {
			rejected = append(rejected, attrs)
		}
	}
	require.Len(t, rejected, 2)
	for _, a := range rejected {
		assert.Equal(t, invented, a["tulip.tool"], "the span keeps what the model called")
		assert.Equal(t, "true", a["tulip.tool.unknown"])
	}
}

// A near miss with value differences (the refund's amount, a nested
// reference) puts the differing paths on the span, and neither span nor
// metric carries a value: the amounts 120.37 and 125.91 and the
// references SECRET-VALUE-9931 and SECRET-VALUE-4417 appear in no span
// attribute and no tag. (Metrics carry the reason, not the paths: a path
// label would be a series per argument shape.)
func TestNearMissPathsNotValues(t *testing.T) {
	mm := newMemMetrics()
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(), MetricsHandler: mm})
	require.NoError(t, err)
	defer c.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	refundTool := activities.MustTool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true},
		func(_ context.Context, a map[string]any) (map[string]any, error) {
			return map[string]any{"refunded": true}, nil
		})
	secrets := []string{"120.37", "125.91", "SECRET-VALUE-9931", "SECRET-VALUE-4417"}
	done := "done"
	script := scenario.Run{Turns: []scenario.Turn{
		turn(call("c1", "issue_refund", `{"order_id": "ord-1", "amount": 120.37, "note": {"ref": "SECRET-VALUE-9931", "by": "agent"}}`)),
		turn(call("c2", "issue_refund", `{"order_id": "ord-1", "amount": 125.91, "note": {"ref": "SECRET-VALUE-4417", "by": "agent"}}`)),
		{Text: &done},
	}}
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{refundTool}, Models: map[string]activities.Model{"m": script.Model()},
		Observer: agentrun.PublicObserver(tulipotel.NewObserver(tp.Tracer("tulip")))})
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "go"})
	require.NoError(t, err)
	require.Len(t, res.Trace, 2)
	nm := res.Trace[1].NearMiss
	require.NotNil(t, nm, "the second refund ran although the first is recorded")
	require.Equal(t, dedup.ReasonArguments, nm.Reason)
	var paths []string
	for _, d := range nm.Differences {
		paths = append(paths, d.Path)
		assert.NotEmpty(t, d.Now, "the trace (the run's own result) has the values")
	}
	sort.Strings(paths)
	require.Equal(t, []string{"/amount", "/note/ref"}, paths)

	var spanPaths []string
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == "tulip.near_miss.paths" {
				spanPaths = append(spanPaths, a.Value.AsStringSlice()...)
			}
			for _, secret := range secrets {
				assert.NotContains(t, a.Value.Emit(), secret, "span %s attribute %s carries a value", s.Name, a.Key)
			}
		}
	}
	sort.Strings(spanPaths)
	assert.Equal(t, paths, spanPaths, "the span names where the arguments differ")

	got := mm.allWithPrefix("tulip_")
	assert.Equal(t, int64(1), got[agentrun.MetricNearMisses+"{agent=support,reason=arguments,tool=issue_refund}"])
	for k := range got {
		for _, secret := range secrets {
			assert.NotContains(t, k, secret, "a metric tag carries a value")
		}
	}
}
