// Package agentrun is the agent run: a Temporal workflow that calls the
// model through an activity and handles each tool call in the order of
// docs/rules.md (reject, before-hooks, cancel, interrupt, match, execute), until
// a final answer or the turn limit.
//
// Matching and recording happen in the dedup interceptor (package
// interceptor); this package decides, for each call, whether it may match
// (an idempotent tool, in a run not continued by resume) and whether it is
// recorded (not a dangling call run by resume).
package agentrun

import (
	"encoding/json"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/streams"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Stable names of the workflow and its handlers.
const (
	// WorkflowName is the agent-run workflow type.
	WorkflowName = "tulip.AgentRun"
	// QueryState returns a StateView.
	QueryState = "tulip.state"
	// QueryLog returns the execution log's records ([]dedup.Record).
	QueryLog = "tulip.log"
	// UpdateResume answers an interrupt (ResumeInput → ResumeResult). Its
	// validator refuses a resume when the run is not interrupted.
	UpdateResume = "tulip.resume"
	// SignalResume is the same resume, for callers that cannot send
	// updates. It must name its interrupt; an invalid one is dropped.
	SignalResume = "tulip.resume"
	// UpdateHooks installs and removes hooks mid-run (HooksInput).
	UpdateHooks = "tulip.hooks"
	// SignalHooks is the same, as a signal.
	SignalHooks = "tulip.hooks"
	// QueryThread returns the thread state (threadstate.Checkpoint) the run
	// would leave if it closed now; closed runs answer it too.
	QueryThread = protocol.QueryThread
	// QueryConversation pages the run's conversation
	// (threadstate.ConversationRange → threadstate.ConversationPage).
	QueryConversation = protocol.QueryConversation
	// QueryPage pages what the run holds (threadstate.PageRequest → Page):
	// its conversation, an agent's log or its trace, naming the run that
	// holds what it does not.
	QueryPage = threadstate.QueryPage
)

// MemoInterrupt is the memo key holding the current interrupt's id while a
// run is interrupted ("" otherwise). It is written when the workflow task
// that reached the interrupt completes, so a client that reads it knows the
// interrupt is durable and a resume will find it.
const MemoInterrupt = "tulip_interrupt"

// Defaults of RunInput's zero values.
const (
	DefaultAgent    = "support"
	DefaultMaxTurns = 32
	// DefaultContinueAfterTurns: a run continues as new after this many
	// model turns, unless Temporal suggests it earlier.
	DefaultContinueAfterTurns = 250
	// DefaultContinueAfterBytes: a run continues as new once its history
	// is this large, unless Temporal suggests it earlier.
	DefaultContinueAfterBytes = 8 << 20
)

// RunInput starts an agent run.
type RunInput struct {
	// Agent names the agent. Execution logs are per agent. Zero value:
	// "support".
	Agent string `json:"agent,omitempty"`
	// ThreadID, when set, makes the run continue the thread: the run finds
	// the thread's earlier runs itself and starts with their conversation
	// and this agent's log. Start it with workflow ID = thread ID.
	ThreadID string `json:"thread_id,omitempty"`
	// PreviousRunID is an optional hint: the thread's last closed run,
	// when the client knows it (the Go client fills it).
	PreviousRunID string `json:"previous_run_id,omitempty"`
	// NewThread says the thread has no earlier run: the client found no
	// run under the workflow ID and started this one with the reuse
	// policy REJECT_DUPLICATE, so the server guarantees it (the Go client
	// does). The run then loads nothing and does not wait out the
	// visibility store's lag. A run started otherwise must leave it unset:
	// a thread that had runs would start empty.
	NewThread bool `json:"new_thread,omitempty"`
	// Message is the user's message.
	Message string `json:"message,omitempty"`
	// Model names a model registered on the worker. Required.
	Model string `json:"model"`
	// Hooks are installed at start, in order.
	Hooks []string `json:"hooks,omitempty"`
	// Tools names the worker's tools the run is offered: tool names and
	// toolset names (every tool of that toolset). A name the worker does
	// not have fails the run at its start (protocol.ErrBadInput). Zero
	// value: every tool of the worker. Either way a sub-agent is never
	// offered itself.
	Tools []string `json:"tools,omitempty"`
	// NoCompaction: the run never compacts its model's view (compact.go);
	// a call over the model's budget fails it (activities.
	// ErrContextTooLong).
	NoCompaction bool `json:"no_compaction,omitempty"`
	// MaxTurns bounds the model responses of the run, across
	// continue-as-new. Zero value: 32.
	MaxTurns int `json:"max_turns,omitempty"`
	// ContinueAfterTurns continues the run as new after this many model
	// turns in one workflow run (it also continues when Temporal suggests
	// it). Zero value: 250.
	ContinueAfterTurns int `json:"continue_after_turns,omitempty"`
	// ContinueAfterBytes continues the run as new once its history is this
	// large. Zero value: 8 MiB.
	ContinueAfterBytes int `json:"continue_after_bytes,omitempty"`
	// Limits bound argument text. Zero value: 64 levels, 256 KiB.
	Limits dedup.Limits `json:"limits,omitempty"`
	// SequentialCalls runs the calls of one model response one after
	// another. Zero value: they run at once (each call is still decided in
	// order: rejected, hooked, matched against the calls before it).
	SequentialCalls bool `json:"sequential_calls,omitempty"`
	// Stream chooses what the run streams (StreamOptions). Zero value:
	// every decision, and each answer once the model returns.
	Stream *StreamOptions `json:"stream,omitempty"`
	// Instructions are given to the model with every request of the run
	// (ModelRequest.Instructions: the model's system prompt, then these).
	Instructions string `json:"instructions,omitempty"`
	// Params are the run's sampling parameters (ModelRequest.Params).
	Params *protocol.ModelParams `json:"params,omitempty"`
	// ClientTools are tools the caller runs, not the worker: offered to
	// the model after the worker's tools (their Name, Description,
	// Parameters and Idempotent count). A call of one that the log does
	// not serve is held for the caller (an interrupt of ClientToolsHook),
	// and the resume that answers it carries its result
	// (ResumeInput.Results). A name a worker tool has fails the run at
	// its start (protocol.ErrBadInput).
	ClientTools []protocol.ToolSpec `json:"client_tools,omitempty"`
	// ClientTimeoutMillis bounds how long the run waits for its client
	// tools' results, in milliseconds: past it, the held calls are
	// answered as not performed (dropped, never recorded) and the run goes
	// on. Zero: no bound.
	ClientTimeoutMillis int64 `json:"client_timeout_ms,omitempty"`
	// TestEnv: the run plays in the SDK's test environment (agent.RunTest),
	// which has no server. A sub-agent's thread starts there as new; what
	// would read a thread's earlier runs (a sub-agent called again on its
	// thread) is refused with protocol.ErrBadInput.
	TestEnv bool `json:"test_env,omitempty"`
	// Parent, on a sub-agent's run, names the run that called it
	// (subagent.go).
	Parent *ParentRef `json:"parent,omitempty"`
	// Fork makes the run a fork of another thread (fork.go): its calls
	// are served from that thread's log, and the calls it never made are
	// held.
	Fork *ForkInput `json:"fork,omitempty"`
	// Continued is the state a run hands to its continuation; only
	// continue-as-new sets it.
	Continued *Carry `json:"continued,omitempty"`
}

// Carry is the durable state of a run that continues as new: the run's
// counters and hooks here, and the thread state (conversation, every
// agent's log, the trace) in segments: the continue-as-new input's further
// payloads (Segment as JSON, in binary/plain payloads, so that no converter
// scans them twice), one per run of the chain, each written once. A segment never
// changes once written, so with external storage (content-addressed) the
// chain stores each byte once, whatever its length. Within a segment, this
// agent's records and the trace lines of recorded calls leave out the
// arguments and results the conversation already holds (ArgsRef,
// ResultRef).
type Carry struct {
	Hooks      []string `json:"hooks"`
	Turn       int      `json:"turn"`
	Phase      int      `json:"phase"`
	PhaseTurn  int      `json:"phase_turn"`
	Resumed    bool     `json:"resumed,omitempty"`
	Interrupts int      `json:"interrupts,omitempty"`
	Answered   []string `json:"answered,omitempty"`
	// Executions and BaseLen count executions for non-idempotent keys.
	Executions int `json:"executions"`
	BaseLen    int `json:"base_len"`
	// Responses is this agent's log's response counter.
	Responses int `json:"responses"`
	// Sent is the conversation the last model call saw.
	Sent activities.Cursor `json:"sent"`
	// Digest is the whole conversation's digest.
	Digest string `json:"digest"`
	// Segments is the number of segment payloads that follow the input
	// (carries written before State).
	Segments int `json:"segments"`
	// Continued counts the continue-as-new steps so far.
	Continued int `json:"continued"`
	// State is the thread state by reference (conversation, every agent's
	// log), the same value a thread run leaves in RunResult.State.
	State *threadstate.Checkpoint `json:"state,omitempty"`
	// Trace is the run's trace so far, in full, after the lines
	// TraceParts hold.
	Trace []TraceLine `json:"trace,omitempty"`
	// TraceParts say which runs of the chain hold the trace's first lines.
	TraceParts []threadstate.Part `json:"trace_parts,omitempty"`
	// Summary counts the calls of the lines TraceParts hold by outcome.
	Summary map[Outcome]int `json:"summary,omitempty"`
	// Toolsets are the toolsets' tools the run read when it started.
	Toolsets []protocol.ToolSpec `json:"toolsets,omitempty"`
	// Stream is the run's stream, handed over (streams.State).
	Stream *streams.State `json:"stream,omitempty"`
	// Save: the chain saves its thread's state through the worker's
	// Checkpointer at its end (the first run's thread load said so).
	// Absent in carries written before it: such a chain did not save.
	Save bool `json:"save,omitempty"`
	// Usage is the chain's token counts so far (RunResult.Usage).
	Usage *threadstate.Usage `json:"usage,omitempty"`
	// ThreadUsage is the thread's token counts before the chain (its
	// loaded state's): State.Usage counts the chain's too.
	ThreadUsage *threadstate.Usage `json:"thread_usage,omitempty"`
	// ThreadUsageByModel is ThreadUsage per model.
	ThreadUsageByModel map[string]*threadstate.Usage `json:"thread_usage_by_model,omitempty"`
}

// MaxSegments bounds the segment payloads of a continue-as-new input; a
// longer chain merges its two oldest segments.
const MaxSegments = 8

// Segment is one part of a carried thread state (see Carry).
type Segment struct {
	// Agents holds the other agents' logs (first segment only).
	Agents   map[string]json.RawMessage `json:"agents,omitempty"`
	Messages []threadstate.Message      `json:"messages"`
	Records  []CarriedRecord            `json:"records"`
	Trace    []CarriedLine              `json:"trace"`
}

// Outcome is how a tool call was settled (the trace's outcome).
type Outcome string

// The outcomes of docs/scenarios.md.
const (
	OutcomeExecuted  Outcome = "executed"
	OutcomeCached    Outcome = "cached"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeHeld      Outcome = "held"
	OutcomeDangling  Outcome = "dangling"
	OutcomeDropped   Outcome = "dropped"
	OutcomeRejected  Outcome = "rejected"
)

// outcomes is every Outcome.
var outcomes = []Outcome{OutcomeExecuted, OutcomeCached, OutcomeCancelled, OutcomeHeld, OutcomeDangling, OutcomeDropped, OutcomeRejected}

// CarriedRecord is a record whose arguments (ArgsRef) or result
// (ResultRef) may be left out: they are those of its call in the
// conversation.
type CarriedRecord struct {
	dedup.Record
	ArgsRef   bool `json:"args_ref,omitempty"`
	ResultRef bool `json:"result_ref,omitempty"`
}

// CarriedLine is a trace line whose arguments (ArgsRef) or result
// (ResultRef) may be left out, likewise.
type CarriedLine struct {
	TraceLine
	ArgsRef   bool `json:"args_ref,omitempty"`
	ResultRef bool `json:"result_ref,omitempty"`
}

// TraceLine is one settled tool call.
type TraceLine struct {
	Turn   int    `json:"turn"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments as compared for dedup (post-hook); null when rejected.
	Arguments json.RawMessage `json:"arguments"`
	Outcome   Outcome         `json:"outcome"`
	Result    json.RawMessage `json:"result"`
	Error     *string         `json:"error"`
	// ServedFrom is the log record a cached call was served from.
	ServedFrom *int           `json:"served_from,omitempty"`
	Relation   dedup.Relation `json:"relation,omitempty"`
	// Key is the downstream idempotency key of an execution.
	Key string `json:"key,omitempty"`
	// ResultIn, with no Result, says the result is the content of that
	// message of the thread's conversation (counted from 0 across its
	// runs): a call served from a record whose result another run holds.
	ResultIn *int `json:"result_in,omitempty"`
	// NearMiss, on a call whose body ran although its tool already had
	// records in the log, names the nearest record and why it did not
	// serve the call (docs/rules.md, "Why did it run again?").
	NearMiss *dedup.NearMiss `json:"near_miss,omitempty"`
	// Unknown, on an executed call of a tool with ToolSpec.OnUnknown
	// "check" or "hold", says that an attempt's outcome was unknown and how the run
	// resolved it (docs/unknown.md).
	Unknown *Unknown `json:"unknown,omitempty"`
}

// Unknown is a call whose attempt's outcome was unknown, and what the
// run did about it (dedup.Unknown: the trace line and the record hold the
// same).
type Unknown = dedup.Unknown

// The resolutions of an unknown outcome.
const (
	// ResolvedApplied: a check found the execution applied; its answer is
	// the call's outcome, and the body did not run again.
	ResolvedApplied = "applied"
	// ResolvedRetried: a check found it not applied, and the call ran
	// again with the same key; the line's outcome is that run's.
	ResolvedRetried = "retried"
	// ResolvedNotApplied: the check found it not applied, and the call
	// had no execution left (RetryPolicy.MaximumAttempts): the line's
	// error says so.
	ResolvedNotApplied = "not_applied"
	// ResolvedAnswered: a person said what happened (a resume's result);
	// it is the call's outcome.
	ResolvedAnswered = "answered"
	// Unresolved: the outcome is still unknown (the check failed, or every
	// attempt was lost); the line's error says so (ErrOutcomeUnknown).
	Unresolved = "unresolved"
)

// Run statuses.
const (
	StatusRunning     = "running"
	StatusInterrupted = "interrupted"
	StatusCompleted   = "completed"
	StatusFailed      = "failed"
)

// Interrupt describes a paused run.
type Interrupt struct {
	// ID names this interrupt; a resume answers it by ID.
	ID     string `json:"id"`
	Turn   int    `json:"turn"`
	Hook   string `json:"hook"`
	Reason string `json:"reason"`
	// Held are the calls held: the interrupted call and the rest of its
	// response, as the model emitted them.
	Held []threadstate.ToolCall `json:"held"`
	// Agent, on an interrupt a sub-agent raised, is the agent path of the
	// run that holds the calls ("support/refunds"); "" for this run's own.
	Agent string `json:"agent,omitempty"`
}

// RunResult is the run's result (and, in a failure's details, its state).
type RunResult struct {
	Status   string `json:"status"`
	Agent    string `json:"agent"`
	ThreadID string `json:"thread_id,omitempty"`
	Answer   string `json:"answer,omitempty"`
	Turns    int    `json:"turns"`
	// Trace is the run's trace lines from TraceFrom on. A run whose trace
	// is large (a long run that continued as new, say) leaves its lines to
	// the runs that hold them (TraceParts), read with QueryPage
	// (agent.Trace does).
	Trace []TraceLine `json:"trace"`
	// TraceFrom is the number of Trace's first line.
	TraceFrom int `json:"trace_from,omitempty"`
	// TraceParts say which runs (of the chain, this one included) hold
	// lines [0, TraceFrom).
	TraceParts []threadstate.Part `json:"trace_parts,omitempty"`
	Interrupt  *Interrupt         `json:"interrupt,omitempty"`
	Error      string             `json:"error,omitempty"`
	// Checkpoint is the thread's state after this run (thread runs).
	Checkpoint *threadstate.Checkpoint `json:"checkpoint,omitempty"`
	// ContinuedAsNew counts the times the run continued as new.
	ContinuedAsNew int `json:"continued_as_new,omitempty"`
	// State is the thread's state after this run, by reference (thread
	// runs): what the thread's next run loads.
	State *threadstate.Checkpoint `json:"state,omitempty"`
	// Summary counts the run's tool calls by outcome.
	Summary map[Outcome]int `json:"summary,omitempty"`
	// Usage sums the token counts of every model response the run took
	// (resumes and continue-as-new included); nil when its model reported
	// none.
	Usage *threadstate.Usage `json:"usage,omitempty"`
	// ThreadUsage, for a run on a thread, is the thread's token counts
	// through this run: every run and agent on it (states written before
	// threads counted them count from then on).
	ThreadUsage *threadstate.Usage `json:"thread_usage,omitempty"`
	// ClientTools names the run's client tools (RunInput.ClientTools), in
	// order: a trace line of one of them is a call the caller ran.
	ClientTools []string `json:"client_tools,omitempty"`
	// Compactions are the compactions of the model's view of the
	// conversation this workflow run made (docs/context.md).
	Compactions []Compaction `json:"compactions,omitempty"`
	// StoreError: the run's save to the worker's thread store failed
	// (after its retries), so the run completed with its answer and
	// history alone holds its state: the thread's next run reads it from
	// there, and saves again.
	StoreError string `json:"store_error,omitempty"`
}

// StateView is what QueryState returns: the run so far.
type StateView = RunResult

// ResumeInput answers an interrupt.
type ResumeInput struct {
	// InterruptID names the interrupt answered. Empty means the current
	// one (updates only; a signal must name it).
	InterruptID string `json:"interrupt_id,omitempty"`
	// Answer is given to the model.
	Answer string `json:"answer"`
	// PerformDangling runs the held calls (unmatched, unrecorded); without
	// it they do not run. The interrupted call runs with the arguments its
	// held line showed; the later ones go through the before-hooks (a
	// rewrite applies, a cancel cancels) and are not held again.
	PerformDangling bool `json:"perform_dangling"`
	// Results answer an interrupt of ClientToolsHook: one for each held
	// call, which is recorded with it as its outcome (and is the tool
	// message the model reads). Such a resume takes no Answer and no
	// PerformDangling; any other interrupt takes no Results.
	Results []ToolResult `json:"results,omitempty"`
	// expired: no resume came in time (RunInput.ClientTimeout); the run
	// made this one up, answering nothing.
	expired bool
}

// ToolResult is what a client tool returned for one held call.
type ToolResult struct {
	CallID string `json:"call_id"`
	// Output is the tool's output: JSON text is the result as that JSON
	// value, any other text as a JSON string.
	Output string `json:"output"`
	// IsError makes Output the call's error (its message).
	IsError bool `json:"is_error,omitempty"`
}

// ClientToolsHook names, in an Interrupt, a run waiting for the results of
// its client tools' calls (RunInput.ClientTools).
const ClientToolsHook = "client_tools"

// ResumeResult reports what a resume did.
type ResumeResult struct {
	InterruptID string `json:"interrupt_id"`
	// Duplicate: this interrupt was already answered; nothing happened.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Page answers QueryPage: threadstate.Page, and for the kind "trace" the
// trace lines [From, Next) in full.
type Page struct {
	threadstate.Page
	Trace []TraceLine `json:"trace,omitempty"`
}

// HooksInput installs and removes hooks by name.
type HooksInput struct {
	Install []string `json:"install,omitempty"`
	Remove  []string `json:"remove,omitempty"`
}
