package tulip

import (
	"time"

	"github.com/tulip-temporal/tulip/internal/agentrun"
)

// Observer receives each call decision and model call of the worker's
// runs, once, never during replay. It runs in workflow code, so it must
// not block (module github.com/tulip-temporal/tulip/otel has an
// OpenTelemetry one).
type Observer interface {
	Decision(CallEvent)
	ModelCall(ModelEvent)
}

// CallEvent is a call decision an Observer receives: no arguments and no
// results (they may be secret), the downstream key only as a hash.
type CallEvent struct {
	// WorkflowID and RunID are the run's.
	WorkflowID, RunID string
	// Agent and Thread are the run's agent and thread ("" for none).
	Agent, Thread string
	// AgentPath is the run's agent under its callers' ("support/billing"
	// for a sub-agent billing that agent support called; the agent alone
	// for a run no agent called); ParentWorkflowID is the calling run's
	// workflow ("" for none). Together they are the tree of sub-agents.
	AgentPath, ParentWorkflowID string
	// Turn is the model response the call came from.
	Turn int
	// CallID and Tool are the call's.
	CallID, Tool string
	// UnknownTool says the run has no tool named Tool (the model invented
	// it; the call was rejected): metrics tag it "unknown".
	UnknownTool bool
	// Outcome is how the call was settled: "executed", "cached" (served),
	// "cancelled", "held", "dangling", "dropped" or "rejected".
	Outcome string
	// Relation, for a served call, is the rule it matched under:
	// "earlier_turn" or "same_response".
	Relation string
	// ServedFrom is the record a served call was served from, or -1.
	ServedFrom int
	// KeyHash is the first 16 hex digits of the SHA-256 of the downstream
	// key ("" without one).
	KeyHash string
	// Failed says the outcome is an error.
	Failed bool
	// NearMissReason and NearMissPaths, for a call that ran although its
	// tool had records, say why the nearest record did not serve it and
	// where the arguments differ (JSON Pointers; never the values).
	NearMissReason string
	NearMissPaths  []string
	// At is the workflow time of the decision.
	At time.Time
}

// ModelEvent is a model call an Observer receives.
type ModelEvent struct {
	// WorkflowID and RunID are the run's.
	WorkflowID, RunID string
	// Agent is the run's agent, Model the model it called.
	Agent, Model string
	// AgentPath and ParentWorkflowID are as in CallEvent.
	AgentPath, ParentWorkflowID string
	// Turn is the model response; Calls counts the tool calls in it.
	Turn  int
	Calls int
	// Start is when the call was scheduled, End when it answered (workflow
	// time).
	Start, End time.Time
	// Failed says the call failed.
	Failed bool
}

// observer adapts an Observer to the workflow's.
type observer struct{ o Observer }

func (a observer) Decision(d agentrun.Decision) {
	a.o.Decision(CallEvent{WorkflowID: d.WorkflowID, RunID: d.RunID, Agent: d.Agent, Thread: d.Thread,
		AgentPath: d.AgentPath, ParentWorkflowID: d.ParentWorkflowID,
		Turn: d.Turn, CallID: d.CallID, Tool: d.Tool, UnknownTool: d.UnknownTool, Outcome: string(d.Outcome),
		Relation: string(d.Relation), ServedFrom: d.ServedFrom, KeyHash: d.KeyHash, Failed: d.Failed,
		NearMissReason: string(d.NearMissReason), NearMissPaths: d.NearMissPaths, At: d.At})
}

func (a observer) ModelCall(m agentrun.ModelCall) {
	a.o.ModelCall(ModelEvent(m))
}

func init() {
	agentrun.PublicObserver = func(o any) agentrun.Observer {
		if io, ok := o.(agentrun.Observer); ok {
			return io
		}
		return observer{o.(Observer)}
	}
}
