package agentrun

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// Metric names, emitted through the SDK's metrics handler (so a Prometheus
// or OpenTelemetry handler on the client receives them). Workflow metrics
// and Observer calls are not made during replay, and a worker remembers
// what it emitted (emitted below): a run's decision goes out once from a
// worker however often that worker replays the run or retries the
// workflow task that made it. A task retried on another worker after the
// first one emitted and died is emitted by both (a scrape-based exporter
// loses the dead process's counts with it; a push-based one may have sent
// them).
//
// Every tag value is bounded (a Prometheus series per value): tool is a
// tool of the run (the worker's, or a toolset's) or UnknownTag for a name
// the model invented; agent is the run's agent when the worker's bound lets it through (its
// MetricAgents, or at most DefaultMetricAgentLimit distinct names a
// worker, then OtherTag); model is a model the worker has (UnknownTag for
// one it has not); outcome, relation, reason, hook and kind come from
// fixed sets or the worker's configuration.
const (
	// MetricToolCalls counts tool-call decisions; tags tool, agent,
	// outcome (the trace's), relation (for served calls).
	MetricToolCalls = "tulip_tool_calls"
	// MetricServedCalls counts calls served from the log: side effects
	// prevented. Tags tool, agent, relation.
	MetricServedCalls = "tulip_served_calls"
	// MetricNearMisses counts calls whose body ran although their tool
	// already had records: tags tool, agent, reason (dedup.NearMissReason).
	MetricNearMisses = "tulip_near_misses"
	// MetricUnknownOutcomes counts calls whose attempt's outcome was
	// unknown (docs/unknown.md): tags tool, agent, resolution.
	MetricUnknownOutcomes = "tulip_unknown_outcomes"
	// MetricInterruptsOpened and MetricInterruptsResumed count interrupts;
	// tags agent, hook.
	MetricInterruptsOpened  = "tulip_interrupts_opened"
	MetricInterruptsResumed = "tulip_interrupts_resumed"
	// MetricContinuedAsNew counts continue-as-new steps; tag agent.
	MetricContinuedAsNew = "tulip_continued_as_new"
	// MetricCompactions counts compactions of a model's view of a
	// conversation (docs/context.md); tag agent.
	MetricCompactions = "tulip_compactions"
	// MetricStateBytes is the size of the state a run carries into its
	// continuation or leaves to its thread; tags agent, kind
	// (continue_as_new, checkpoint).
	MetricStateBytes = "tulip_state_bytes"
	// MetricModelTurnLatency is the time from scheduling a model call to
	// its answer, as the workflow saw it; tags agent, model.
	MetricModelTurnLatency = "tulip_model_turn_latency"
)

// Tag values that stand for many: a tool the model named that the run
// does not have (an invented name would be a new series per invention),
// and an agent beyond the worker's bound.
const (
	UnknownTag = "unknown"
	OtherTag   = "other"
)

// DefaultMetricAgentLimit is how many distinct agent names a worker tags
// its metrics with when its configuration lists none (Config.MetricAgents):
// the first this many it sees, in the order it sees them; later ones are
// tagged OtherTag.
const DefaultMetricAgentLimit = 100

// agentTags bounds the agent tag: a list of known agents, or the first
// DefaultMetricAgentLimit seen. Safe for concurrent use (one per worker).
type agentTags struct {
	known map[string]bool // nil: the first limit seen
	mu    sync.Mutex
	seen  map[string]bool
	limit int
}

func newAgentTags(known []string) *agentTags {
	a := &agentTags{seen: map[string]bool{}, limit: DefaultMetricAgentLimit}
	if known != nil {
		a.known = map[string]bool{}
		for _, k := range known {
			a.known[k] = true
		}
	}
	return a
}

// tag is agent's tag value.
func (a *agentTags) tag(agent string) string {
	if a == nil {
		return agent
	}
	if a.known != nil {
		if a.known[agent] {
			return agent
		}
		return OtherTag
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[agent] {
		return agent
	}
	if len(a.seen) < a.limit {
		a.seen[agent] = true
		return agent
	}
	return OtherTag
}

// agentTag is the agent tag of this run's metrics.
func (r *run) agentTag() string {
	if r.metricAgent == "" {
		r.metricAgent = r.cfg.agents.tag(r.in.Agent)
	}
	return r.metricAgent
}

// toolTag is the tool tag of a call of name: the name of a tool this run
// has, UnknownTag otherwise.
func (r *run) toolTag(name string) string {
	if _, ok := r.tools[name]; ok {
		return name
	}
	if _, ok := r.client[name]; ok {
		return ClientTag
	}
	return UnknownTag
}

// Decision is one tool-call decision, for an Observer: no arguments and no
// results (they may be secret), the downstream key only as a hash.
type Decision struct {
	WorkflowID, RunID string
	Agent, Thread     string
	// AgentPath is the run's agent under its callers' ("support/billing"
	// for sub-agent billing of support; the agent alone for a run no
	// agent called); ParentWorkflowID is the calling run's workflow, or
	// "".
	AgentPath, ParentWorkflowID string
	Turn                        int
	CallID, Tool                string
	// UnknownTool says the run has no tool named Tool (the model invented
	// it; the call was rejected): metrics tag it UnknownTag.
	UnknownTool bool
	Outcome     Outcome
	Relation    dedup.Relation
	// ServedFrom is the record a served call was served from, or -1.
	ServedFrom int
	// KeyHash is the first 16 hex digits of SHA-256 of the downstream key
	// ("" without one).
	KeyHash string
	// Failed says the outcome is an error.
	Failed bool
	// NearMissReason and NearMissPaths, for a call that ran although its
	// tool had records, say why the nearest record did not serve it and
	// where the arguments differ (JSON Pointers; never the values).
	NearMissReason dedup.NearMissReason
	NearMissPaths  []string
	// At is the workflow time of the decision.
	At time.Time
}

// ModelCall is one model call, for an Observer.
type ModelCall struct {
	WorkflowID, RunID string
	Agent, Model      string
	// AgentPath and ParentWorkflowID are as in Decision.
	AgentPath, ParentWorkflowID string
	Turn                        int
	Calls                       int // tool calls in the answer
	Start, End                  time.Time
	Failed                      bool
}

// PublicObserver adapts an observer of package tulip's Observer interface
// (or one of this package's, returned as it is) for this package. Package
// tulip sets it when it is initialized (it imports this package, which so
// cannot import it); the module's tests and tools that build workers from
// internal options take public observers (otel's) through it.
var PublicObserver func(o any) Observer

// Observer receives each decision and model call once: never during
// replay. It runs in workflow code, so it must not block; an OpenTelemetry
// observer that makes a span per decision is in the module
// github.com/tulip-temporal/tulip/otel.
type Observer interface {
	Decision(Decision)
	ModelCall(ModelCall)
}

// emitted remembers the decisions a worker emitted (by run and key), up
// to a bound, oldest forgotten first. It keeps a 64-bit hash of each key
// (16 bytes an entry, not the key's text): two keys that collide (about
// one chance in 10^9 at the bound) lose one decision's metric. Numbered
// emissions (a run's trace lines, its model turns) go out in increasing
// order, so one entry per run and kind holds them all: the highest number
// emitted (a run of 1,000 turns is two entries, not 2,000).
type emitted struct {
	mu    sync.Mutex
	seen  map[uint64]int // key hash → for a numbered kind, 1 + the highest number emitted
	order []uint64
	next  int
}

// emittedBound bounds what a worker remembers: a task retried after more
// keys than this went out is emitted again.
const emittedBound = 1 << 17

func newEmitted() *emitted { return &emitted{seen: map[uint64]int{}} }

func keyHash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()
}

// first reports whether key is new, and remembers it.
func (e *emitted) first(key string) bool { return e.firstNumbered(key, 0) }

// firstNumbered reports whether emission n (from 0) of the numbered kind
// key is new: past the highest emitted. A worker emits a run's numbered
// emissions in increasing order (replay emits nothing, and a retried task
// emits again from where its attempt began), so the highest one stands
// for all those before it.
func (e *emitted) firstNumbered(key string, n int) bool {
	k := keyHash(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	if hw, ok := e.seen[k]; ok {
		if n < hw {
			return false
		}
		e.seen[k] = n + 1
		return true
	}
	if len(e.order) < emittedBound {
		e.order = append(e.order, k)
	} else {
		delete(e.seen, e.order[e.next])
		e.order[e.next] = k
		e.next = (e.next + 1) % emittedBound
	}
	e.seen[k] = n + 1
	return true
}

// once reports whether the emission named key (unique within the run)
// goes out now: not during replay, and not twice from this worker.
func (r *run) once(ctx wf.Context, key string) bool {
	if !r.carriesThread || wf.IsReplaying(ctx) {
		return false
	}
	if r.cfg.emitted == nil {
		return true
	}
	return r.cfg.emitted.first(r.runID + "/" + key)
}

// onceNumbered is once for emission n of a numbered kind (kind, n unique
// within the run; n increasing as the run goes).
func (r *run) onceNumbered(ctx wf.Context, kind string, n int) bool {
	if !r.carriesThread || wf.IsReplaying(ctx) {
		return false
	}
	if r.cfg.emitted == nil {
		return true
	}
	return r.cfg.emitted.firstNumbered(r.runID+"/"+kind+"/#", n)
}

// observeLine reports a settled (or held) trace line: metrics and the
// observer.
func (r *run) observeLine(ctx wf.Context, l TraceLine) {
	if !r.onceNumbered(ctx, "line", r.traceBase+len(r.trace)-1) {
		return
	}
	mh := wf.GetMetricsHandler(ctx)
	tool, agent := r.toolTag(l.Tool), r.agentTag()
	tags := map[string]string{"tool": tool, "agent": agent, "outcome": string(l.Outcome)}
	if l.Relation != "" {
		tags["relation"] = string(l.Relation) // served calls only: no empty tag values
	}
	mh.WithTags(tags).Counter(MetricToolCalls).Inc(1)
	if l.Outcome == OutcomeCached {
		mh.WithTags(map[string]string{"tool": tool, "agent": agent, "relation": string(l.Relation)}).Counter(MetricServedCalls).Inc(1)
	}
	if l.NearMiss != nil {
		mh.WithTags(map[string]string{"tool": tool, "agent": agent, "reason": string(l.NearMiss.Reason)}).Counter(MetricNearMisses).Inc(1)
	}
	if l.Unknown != nil && l.Unknown.Resolution != "" {
		mh.WithTags(map[string]string{"tool": tool, "agent": agent, "resolution": l.Unknown.Resolution}).Counter(MetricUnknownOutcomes).Inc(1)
	}
	if r.cfg.Observer == nil {
		return
	}
	info := wf.GetInfo(ctx)
	d := Decision{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, Agent: r.in.Agent, Thread: r.in.ThreadID,
		Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, UnknownTool: r.tools[l.Tool] == nil && r.client[l.Tool] == nil, Outcome: l.Outcome, Relation: l.Relation, ServedFrom: -1,
		Failed: l.Error != nil, At: wf.Now(ctx)}
	if l.ServedFrom != nil {
		d.ServedFrom = *l.ServedFrom
	}
	if nm := l.NearMiss; nm != nil {
		d.NearMissReason = nm.Reason
		for _, diff := range nm.Differences {
			d.NearMissPaths = append(d.NearMissPaths, diff.Path)
		}
	}
	if l.Key != "" {
		sum := sha256.Sum256([]byte(l.Key))
		d.KeyHash = hex.EncodeToString(sum[:8])
	}
	d.AgentPath, d.ParentWorkflowID = r.agentPath(), r.parentWorkflow()
	r.cfg.Observer.Decision(d)
}

// parentWorkflow is the workflow of the run that called this one, or "".
func (r *run) parentWorkflow() string {
	if r.in.Parent == nil {
		return ""
	}
	return r.in.Parent.WorkflowID
}

// observeModel reports a model call; err is its failure, or nil.
func (r *run) observeModel(ctx wf.Context, start time.Time, calls int, err error) {
	if !r.onceNumbered(ctx, "model", r.turn) {
		return
	}
	failed := err != nil
	model := r.in.Model
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == protocol.ErrUnknownModel {
		model = UnknownTag // the client's name, which no worker has
	}
	end := wf.Now(ctx)
	wf.GetMetricsHandler(ctx).WithTags(map[string]string{"agent": r.agentTag(), "model": model}).
		Timer(MetricModelTurnLatency).Record(end.Sub(start))
	if r.cfg.Observer == nil {
		return
	}
	info := wf.GetInfo(ctx)
	r.cfg.Observer.ModelCall(ModelCall{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		Agent: r.in.Agent, Model: r.in.Model, AgentPath: r.agentPath(), ParentWorkflowID: r.parentWorkflow(),
		Turn: r.turn, Calls: calls, Start: start, End: end, Failed: failed})
}

// count adds n to a counter tagged with the agent and more; key names the
// emission within the run.
func (r *run) count(ctx wf.Context, key, name string, n int64, tags ...string) {
	if !r.once(ctx, key) {
		return
	}
	m := map[string]string{"agent": r.agentTag()}
	for i := 0; i+1 < len(tags); i += 2 {
		m[tags[i]] = tags[i+1]
	}
	wf.GetMetricsHandler(ctx).WithTags(m).Counter(name).Inc(n)
}

// gauge sets a gauge tagged with the agent and kind; key names the
// emission within the run.
func (r *run) gauge(ctx wf.Context, key, name string, v int, kind string) {
	r.gaugeOf(ctx, key, name, func() int { return v }, kind)
}

// gaugeOf is gauge with a value worth computing only when it goes out
// (never on replay).
func (r *run) gaugeOf(ctx wf.Context, key, name string, v func() int, kind string) {
	if !r.once(ctx, key) {
		return
	}
	wf.GetMetricsHandler(ctx).WithTags(map[string]string{"agent": r.agentTag(), "kind": kind}).Gauge(name).Update(float64(v()))
}
