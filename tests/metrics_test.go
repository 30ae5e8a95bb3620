package tests

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/demo"
	tworker "github.com/tulip-temporal/tulip/worker"
	"github.com/tulip-temporal/tulip/workflow"
)

// memMetrics is an in-memory client.MetricsHandler: counter sums and
// timer/gauge observation counts by name and sorted tags.
type memMetrics struct {
	mu     *sync.Mutex
	tags   map[string]string
	counts map[string]int64
}

func newMemMetrics() *memMetrics {
	return &memMetrics{mu: &sync.Mutex{}, tags: map[string]string{}, counts: map[string]int64{}}
}

func (m *memMetrics) key(name string) string {
	var parts []string
	for k, v := range m.tags {
		if v != "" && (k == "tool" || k == "outcome" || k == "relation" || k == "kind" || k == "hook") {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

func (m *memMetrics) WithTags(t map[string]string) client.MetricsHandler {
	n := &memMetrics{mu: m.mu, tags: map[string]string{}, counts: m.counts}
	for k, v := range m.tags {
		n.tags[k] = v
	}
	for k, v := range t {
		n.tags[k] = v
	}
	return n
}

type memCounter struct {
	m   *memMetrics
	key string
}

func (c memCounter) Inc(n int64) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.counts[c.key] += n
}
func (c memCounter) Update(float64)       { c.Inc(1) }
func (c memCounter) Record(time.Duration) { c.Inc(1) }

func (m *memMetrics) Counter(name string) client.MetricsCounter { return memCounter{m, m.key(name)} }
func (m *memMetrics) Gauge(name string) client.MetricsGauge     { return memCounter{m, m.key(name)} }
func (m *memMetrics) Timer(name string) client.MetricsTimer     { return memCounter{m, m.key(name)} }

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
	startWorker(t, c, tq, tworker.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: story.Models(tq)})
	thread := threadID(t)
	var trace []workflow.TraceLine
	var last agent.Handle
	for i := range story.Runs {
		h, res, err := agent.Run(ctxT(t), c, agent.RunOptions{TaskQueue: tq, Model: fmt.Sprintf("scenario:%s:run-%d", tq, i+1), ThreadID: thread, Message: "go"})
		require.NoError(t, err)
		trace = append(trace, res.Trace...)
		last = h
	}
	want := map[string]int64{}
	served := int64(0)
	for _, l := range trace {
		parts := []string{"outcome=" + string(l.Outcome)}
		if l.Relation != "" {
			parts = append(parts, "relation="+string(l.Relation))
		}
		parts = append(parts, "tool="+l.Tool)
		sort.Strings(parts)
		want[workflow.MetricToolCalls+"{"+strings.Join(parts, ",")+"}"]++
		if l.Outcome == workflow.OutcomeCached {
			served++
		}
	}
	check := func(when string) {
		assert.Equal(t, want, mm.withPrefix(workflow.MetricToolCalls+"{"), when)
		var gotServed int64
		for _, v := range mm.withPrefix(workflow.MetricServedCalls + "{") {
			gotServed += v
		}
		assert.Equal(t, served, gotServed, "%s: side effects prevented", when)
	}
	check("after the runs")
	assert.Equal(t, int64(4), served)
	assert.Equal(t, int64(tb.Invocations()["issue_refund"]), mm.get(activities.MetricToolLatency+"{outcome=ok,tool=issue_refund}"), "one timing per body attempt")
	assert.Greater(t, mm.get(workflow.MetricModelTurnLatency+"{}"), int64(0))

	_, err = agent.Log(ctxT(t), c, last) // a query: one more replay
	require.NoError(t, err)
	check("after a replay")
}
