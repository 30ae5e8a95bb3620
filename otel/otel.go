// Package otel connects tulip to OpenTelemetry: an Observer that makes one
// span per tool-call decision and per model call, and a Temporal metrics
// handler over an OpenTelemetry meter (for the SDK's metrics and tulip's).
// It lives in its own module so that the library never pulls OpenTelemetry
// in.
//
// Spans carry the decision (tool, outcome, relation, the record a served
// call came from, the downstream key's hash), never arguments or results,
// which may be secret. The workflow reports each decision once, never
// during replay, so a replay makes no duplicate span. Spans name their
// workflow and run in attributes (temporal.workflow_id, temporal.run_id);
// they sit beside the spans of the SDK's OpenTelemetry tracing interceptor
// (go.temporal.io/sdk/contrib/opentelemetry), which can be installed too.
package otel

import (
	"context"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip"
)

// Observer makes spans of tulip's decisions. Set it as
// tulip.Options.Observer.
type Observer struct {
	tracer trace.Tracer
}

var _ tulip.Observer = (*Observer)(nil)

// NewObserver returns an Observer that makes its spans with tracer.
func NewObserver(tracer trace.Tracer) *Observer { return &Observer{tracer: tracer} }

// Decision implements tulip.Observer: a span "tulip.decision".
func (o *Observer) Decision(d tulip.CallEvent) {
	attrs := []attribute.KeyValue{
		attribute.String("temporal.workflow_id", d.WorkflowID),
		attribute.String("temporal.run_id", d.RunID),
		attribute.String("tulip.agent", d.Agent),
		attribute.Int("tulip.turn", d.Turn),
		attribute.String("tulip.call_id", d.CallID),
		attribute.String("tulip.tool", spanToolName(d.Tool)),
		attribute.String("tulip.outcome", d.Outcome),
	}
	if d.UnknownTool {
		// A name the model invented: kept on the span (a span attribute
		// is no metric label, and the name shows what the model tried),
		// cut to maxToolName bytes; metrics tag it "unknown".
		attrs = append(attrs, attribute.Bool("tulip.tool.unknown", true))
	}
	if d.Thread != "" {
		attrs = append(attrs, attribute.String("tulip.thread", d.Thread))
	}
	attrs = appendTree(attrs, d.AgentPath, d.ParentWorkflowID)
	if d.Relation != "" {
		attrs = append(attrs, attribute.String("tulip.relation", d.Relation))
	}
	if d.ServedFrom >= 0 {
		attrs = append(attrs, attribute.Int("tulip.served_from", d.ServedFrom))
	}
	if d.KeyHash != "" {
		attrs = append(attrs, attribute.String("tulip.key_hash", d.KeyHash))
	}
	if d.NearMissReason != "" {
		attrs = append(attrs, attribute.String("tulip.near_miss.reason", d.NearMissReason))
		if len(d.NearMissPaths) > 0 {
			attrs = append(attrs, attribute.StringSlice("tulip.near_miss.paths", d.NearMissPaths))
		}
	}
	_, span := o.tracer.Start(context.Background(), "tulip.decision", trace.WithTimestamp(d.At),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	if d.Failed {
		span.SetStatus(codes.Error, "the call's outcome is an error")
	}
	span.End(trace.WithTimestamp(d.At))
}

// appendTree adds a run's place in the tree of sub-agents: its agent
// path, and its caller's workflow when an agent called it.
func appendTree(attrs []attribute.KeyValue, path, parent string) []attribute.KeyValue {
	if path != "" {
		attrs = append(attrs, attribute.String("tulip.agent.path", path))
	}
	if parent != "" {
		attrs = append(attrs, attribute.String("tulip.parent.workflow_id", parent))
	}
	return attrs
}

// maxToolName bounds the tool name on a span: a real tool's name is short
// (OpenAI allows 64 characters), an invented one may be anything.
const maxToolName = 128

// spanToolName is name cut to maxToolName bytes, on a rune boundary.
func spanToolName(name string) string {
	if len(name) <= maxToolName {
		return name
	}
	cut := maxToolName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

// ModelCall implements tulip.Observer: a span "tulip.model" from the
// call's scheduling to its answer.
func (o *Observer) ModelCall(m tulip.ModelEvent) {
	attrs := appendTree([]attribute.KeyValue{
		attribute.String("temporal.workflow_id", m.WorkflowID),
		attribute.String("temporal.run_id", m.RunID),
		attribute.String("tulip.agent", m.Agent),
		attribute.String("tulip.model", m.Model),
		attribute.Int("tulip.turn", m.Turn),
		attribute.Int("tulip.tool_calls", m.Calls),
	}, m.AgentPath, m.ParentWorkflowID)
	_, span := o.tracer.Start(context.Background(), "tulip.model", trace.WithTimestamp(m.Start),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindClient))
	if m.Failed {
		span.SetStatus(codes.Error, "the model call failed")
	}
	span.End(trace.WithTimestamp(m.End))
}

// MetricsHandler is a Temporal client.MetricsHandler over an OpenTelemetry
// meter: counters are Int64Counters, gauges Float64Gauges, timers
// Float64Histograms in seconds (named NAME_seconds). Give it to
// client.Options.MetricsHandler: the SDK's metrics and tulip's go through.
type MetricsHandler struct {
	meter metric.Meter
	attrs attribute.Set
}

// NewMetricsHandler returns a handler that records with meter.
func NewMetricsHandler(meter metric.Meter) *MetricsHandler { return &MetricsHandler{meter: meter} }

// WithTags implements client.MetricsHandler.
func (h *MetricsHandler) WithTags(tags map[string]string) client.MetricsHandler {
	kvs := h.attrs.ToSlice()
	for k, v := range tags {
		kvs = append(kvs, attribute.String(k, v))
	}
	return &MetricsHandler{meter: h.meter, attrs: attribute.NewSet(kvs...)}
}

// Counter implements client.MetricsHandler.
func (h *MetricsHandler) Counter(name string) client.MetricsCounter {
	c, err := h.meter.Int64Counter(name)
	if err != nil {
		return client.MetricsNopHandler.Counter(name)
	}
	return counter{c, h.attrs}
}

// Gauge implements client.MetricsHandler.
func (h *MetricsHandler) Gauge(name string) client.MetricsGauge {
	g, err := h.meter.Float64Gauge(name)
	if err != nil {
		return client.MetricsNopHandler.Gauge(name)
	}
	return gauge{g, h.attrs}
}

// Timer implements client.MetricsHandler.
func (h *MetricsHandler) Timer(name string) client.MetricsTimer {
	t, err := h.meter.Float64Histogram(name+"_seconds", metric.WithUnit("s"))
	if err != nil {
		return client.MetricsNopHandler.Timer(name)
	}
	return timer{t, h.attrs}
}

type counter struct {
	c     metric.Int64Counter
	attrs attribute.Set
}

func (c counter) Inc(n int64) { c.c.Add(context.Background(), n, metric.WithAttributeSet(c.attrs)) }

type gauge struct {
	g     metric.Float64Gauge
	attrs attribute.Set
}

func (g gauge) Update(v float64) {
	g.g.Record(context.Background(), v, metric.WithAttributeSet(g.attrs))
}

type timer struct {
	h     metric.Float64Histogram
	attrs attribute.Set
}

func (t timer) Record(d time.Duration) {
	t.h.Record(context.Background(), d.Seconds(), metric.WithAttributeSet(t.attrs))
}
