package agent

import (
	"encoding/json"

	"github.com/tulip-temporal/tulip"
)

// Result is a run's result, or its state so far (Run.State).
type Result struct {
	// Status is Running, Interrupted, Completed or Failed.
	Status Status `json:"status"`
	// Agent is the agent that ran ("" the default one).
	Agent string `json:"agent"`
	// ThreadID is the run's thread ("" for a run on none).
	ThreadID string `json:"thread_id,omitempty"`
	// Answer is the model's final answer (Completed).
	Answer string `json:"answer,omitempty"`
	// Turns counts the model responses the run took.
	Turns int `json:"turns"`
	// Trace is every settled call of the run, in order: also the lines
	// earlier runs of a continued chain hold.
	Trace []TraceLine `json:"trace"`
	// Interrupt is the run's question, when Status is Interrupted.
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	// Error is the failure, when Status is Failed.
	Error string `json:"error,omitempty"`
	// Checkpoint is the thread's state after this run, in full, from a
	// run of a worker before states went by reference (runs recorded
	// then, and replays of them); nil from any other run, which sets
	// State instead.
	Checkpoint *tulip.ThreadState `json:"checkpoint,omitempty"`
	// ContinuedAsNew counts the times the run continued as new.
	ContinuedAsNew int `json:"continued_as_new,omitempty"`
	// State is the thread's state after this run (a run on a thread), by
	// reference: its conversation names the runs that hold it, and its
	// records are thin. It is what the thread's next run loads; read it in
	// full with agent.Thread.
	State *tulip.ThreadState `json:"state,omitempty"`
	// Summary counts the run's calls by outcome.
	Summary map[Outcome]int `json:"summary,omitempty"`
	// Usage sums the tokens of every model response the run took
	// (resumes and continue-as-new included); nil when the model reported
	// none.
	Usage *tulip.Usage `json:"usage,omitempty"`
	// ThreadUsage, for a run on a thread, is the thread's tokens through
	// this run: every run and agent on it (threads count them from the
	// first run that did).
	ThreadUsage *tulip.Usage `json:"thread_usage,omitempty"`
	// ClientTools names the run's client tools (Options.ClientTools): a
	// trace line of one of them is a call the caller ran.
	ClientTools []string `json:"client_tools,omitempty"`
	// Compactions are the times the run (its last workflow run) compacted
	// its model's view of the conversation to stay within the model's
	// context budget (docs/context.md). The thread keeps every message.
	Compactions []Compaction `json:"compactions,omitempty"`
	// StoreError: the run's save to the worker's thread store failed, so
	// the run completed with its answer and history alone holds its
	// state; the thread's next run reads it there, and saves again.
	StoreError string `json:"store_error,omitempty"`
}

// Compaction is one compaction of a model's view of a conversation
// (docs/context.md): before Turn's model call, the model was sent a
// summary in place of the conversation's first Upto messages (Replaced of
// them new to this summary), the call being estimated at Estimate tokens
// of the model's Budget (TooLong: the call was refused as too long).
// Usage is what the summary cost.
type Compaction struct {
	Turn     int          `json:"turn"`
	Upto     int          `json:"upto"`
	Replaced int          `json:"replaced"`
	Estimate int          `json:"estimate"`
	Budget   int          `json:"budget"`
	TooLong  bool         `json:"too_long,omitempty"`
	Usage    *tulip.Usage `json:"usage,omitempty"`
}

// Status is where a run stands (Result.Status).
type Status string

// The statuses of a Result.
const (
	// Running: the run is working (Run.State of an open run).
	Running Status = "running"
	// Interrupted: the run waits for a resume (Result.Interrupt).
	Interrupted Status = "interrupted"
	// Completed: the run answered (Result.Answer).
	Completed Status = "completed"
	// Failed: the run failed (Result.Error; Await's error has its kind).
	Failed Status = "failed"
)

// TraceLine is one settled tool call.
type TraceLine struct {
	// Turn is the model response (1-based, in its run) the call came from.
	Turn int `json:"turn"`
	// CallID is the model's tool-call id; Tool the tool's name.
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the arguments as compared (after the hooks); null for
	// a rejected call.
	Arguments json.RawMessage `json:"arguments"`
	// Outcome is how the call was settled.
	Outcome Outcome `json:"outcome"`
	// Result is the call's JSON result, and Error its failure, when it has
	// one.
	Result json.RawMessage `json:"result"`
	Error  *string         `json:"error"`
	// ServedFrom is the log record (Record.Seq) a served call was served
	// from, and Relation the rule it matched under: "earlier_turn" or
	// "same_response"; in a fork, "origin": served from the record
	// (ServedFrom) of the thread it was forked from (docs/forks.md).
	ServedFrom *int   `json:"served_from,omitempty"`
	Relation   string `json:"relation,omitempty"`
	// Key is the downstream idempotency key of an execution.
	Key string `json:"key,omitempty"`
	// NearMiss, on a call whose body ran although its tool already had
	// records, names the nearest record and why it did not serve the call
	// (docs/rules.md, "Why did it run again?").
	NearMiss *NearMiss `json:"near_miss,omitempty"`
	// Unknown, on a call of a tool whose OnUnknown is "check" or "hold",
	// says that an attempt's outcome was unknown and how the run resolved
	// it.
	Unknown *Unknown `json:"unknown,omitempty"`
}

// Unknown is a call whose attempt's outcome was unknown (its worker was
// lost, or the body returned an Ambiguous error) and what the run did:
// asked the tool's check (or a person), and ran the call again (same key)
// only when the check found it not applied (or the person approved).
type Unknown struct {
	// Cause is why the outcome was unknown, the first time.
	Cause string `json:"cause"`
	// Checks is how many times the check asked the service; Retries how
	// many times the call ran again after a check found it not applied.
	Checks  int `json:"checks"`
	Retries int `json:"retries,omitempty"`
	// Holds is how many times the run was interrupted (UnknownHook) for a
	// person to answer, for a tool whose OnUnknown is "hold".
	Holds int `json:"holds,omitempty"`
	// Resolution is "applied" (a check found the execution applied: its
	// answer is the outcome, the body did not run again), "retried" (the
	// line's outcome is the call's run after the check or the approval),
	// "answered" (a person's result is the outcome), "not_applied" (the
	// check found it not applied and no execution was left: the line's
	// error says so) or "unresolved" (the line's error, of kind
	// tulip.OutcomeUnknown, says why).
	Resolution string `json:"resolution"`
}

// NearMiss names the log record nearest to a call that ran, and why it
// did not serve it.
type NearMiss struct {
	// Record is the nearest record's Seq, and CallID its call (trace
	// lines).
	Record int    `json:"record"`
	CallID string `json:"call_id,omitempty"`
	// Reason is "arguments", "not_idempotent", "after_resume",
	// "same_response" or "hook".
	Reason string `json:"reason"`
	// Differences, for "arguments" (and "hook"), are the first few places
	// the arguments differ by the value model: a JSON Pointer, the
	// record's value and the call's (a member one side lacks has no Was or
	// no Now). Trace lines only.
	Differences []struct {
		Path string          `json:"path"`
		Was  json.RawMessage `json:"was,omitempty"`
		Now  json.RawMessage `json:"now,omitempty"`
	} `json:"differences,omitempty"`
	// Distance is how many values differ (trace lines).
	Distance int `json:"distance,omitempty"`
	// Paths are the JSON Pointers that differ, without values (a stream's
	// CallItem).
	Paths []string `json:"paths,omitempty"`
}

// Outcome is how a call was settled.
type Outcome string

// The outcomes, spelled in Go as on the wire (JSON, docs/scenarios.md)
// and in the CLI's tables.
const (
	// Executed: the body ran, and the call is recorded in the log.
	Executed Outcome = "executed"
	// Cached: an earlier record's outcome was given to the call (served
	// from the log); its body did not run.
	Cached Outcome = "cached"
	// Served is Cached.
	//
	// Deprecated: use Cached, the word the wire and the CLI use.
	Served = Cached
	// Cancelled: a before-hook cancelled the call; recorded with its
	// message, which an identical later call is served.
	Cancelled Outcome = "cancelled"
	// Held: an interrupt holds the call until a resume answers it.
	Held Outcome = "held"
	// Dangling: a held call a resume performed: the body ran, and the
	// call is never recorded.
	Dangling Outcome = "dangling"
	// Dropped: a held call a resume declined (or a client call that
	// expired): the body did not run, nothing is recorded.
	Dropped Outcome = "dropped"
	// Rejected: not a call (an unknown tool, arguments that are not a
	// JSON object within the bounds): nothing ran or was recorded.
	Rejected Outcome = "rejected"
)

// Record is one entry of an execution log.
type Record struct {
	// Seq is the record's position in the log, from 0.
	Seq int `json:"seq"`
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Arguments is the argument text compared: after the hooks for
	// executed and served records, the model's own for cancelled ones.
	Arguments string `json:"arguments"`
	// Response numbers the model response the call came from, across the
	// whole log; Turn is the 1-based response within its run, Run that
	// workflow run.
	Response int    `json:"response"`
	Run      string `json:"run,omitempty"`
	Turn     int    `json:"turn"`
	// CallID is the model's tool-call id.
	CallID string `json:"call_id"`
	// Origin is "executed", "cached" (served from the log: the outcome's
	// word) or "cancelled". Records written before this round say
	// "served" for "cached"; they read as "cached".
	Origin string `json:"origin"`
	// Result is the body's JSON result, when it succeeded.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the failure (or the cancel's message), when there is one:
	// its stable type and message.
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
	// ServedFrom is the Seq of the record a served call was served from,
	// and Relation the rule it matched under.
	ServedFrom *int   `json:"served_from,omitempty"`
	Relation   string `json:"relation,omitempty"`
	// Key is the downstream idempotency key the execution carried.
	Key string `json:"key,omitempty"`
	// NearMiss, on an executed record of a tool that already had records,
	// names the nearest of them and why it did not serve the call.
	NearMiss *NearMiss `json:"near_miss,omitempty"`
	// Unknown, as on the call's trace line: an attempt's outcome was
	// unknown, and how the run resolved it.
	Unknown *Unknown `json:"unknown,omitempty"`
}

// Interrupt is a paused run's question.
type Interrupt struct {
	// ID names the interrupt; a resume answers it by ID.
	ID string `json:"id"`
	// Turn is the model response whose call was interrupted.
	Turn int `json:"turn"`
	// Hook is the hook that interrupted (ClientToolsHook for client
	// tools, UnknownHook for a call whose outcome is unknown), and Reason
	// its reason.
	Hook   string `json:"hook"`
	Reason string `json:"reason"`
	// Held are the calls held: the interrupted call and the rest of its
	// response, as the model emitted them.
	Held []tulip.ToolCall `json:"held"`
	// Agent, on an interrupt a sub-agent raised (tulip.AgentTool), is the
	// agent path of the run that holds the calls ("support/refunds");
	// this run's resume answers it. "" for the run's own.
	Agent string `json:"agent,omitempty"`
}

// ResumeInput answers an interrupt (Approve, Decline and ClientResults
// make one).
type ResumeInput struct {
	// InterruptID names the interrupt answered. Empty means the current
	// one (by update only; a signal must name it).
	InterruptID string `json:"interrupt_id,omitempty"`
	// Answer is given to the model.
	Answer string `json:"answer"`
	// PerformDangling runs the held calls (unmatched, unrecorded); without
	// it they do not run. The interrupted call runs with the arguments its
	// held line showed; the later ones go through the hooks and are not
	// held again.
	PerformDangling bool `json:"perform_dangling"`
	// Results answer an interrupt of ClientToolsHook: one for each held
	// call, recorded as its outcome. Such a resume takes no Answer and no
	// PerformDangling. An UnknownHook interrupt takes one (or none);
	// any other takes none.
	Results []ToolResult `json:"results,omitempty"`
}

// ToolResult is a client tool's result for one held call.
type ToolResult struct {
	// CallID is the held call's id.
	CallID string `json:"call_id"`
	// Output is JSON text (the result as that value), or any text (a JSON
	// string then).
	Output string `json:"output"`
	// IsError makes Output the call's error (its message).
	IsError bool `json:"is_error,omitempty"`
}

// The Hooks of the interrupts tulip raises itself.
const (
	// ClientToolsHook: the run waits for the client tools' results
	// (Options.ClientTools).
	ClientToolsHook = "client_tools"
	// UnknownHook: a call of a tool whose OnUnknown is "hold" may have run
	// (its outcome is unknown; Reason says why). Resume with
	// PerformDangling to run it again with the same key, with one
	// ToolResult for it to say what happened (its outcome), or with
	// neither to leave it unknown (Answer, if any, joins its error).
	UnknownHook = "tulip.unknown"
)

// ResumeResult is what a resume did.
type ResumeResult struct {
	// InterruptID is the interrupt answered.
	InterruptID string `json:"interrupt_id"`
	// Duplicate: the interrupt was already answered; nothing happened.
	Duplicate bool `json:"duplicate,omitempty"`
}

// ThreadBusyError: a run is already open on the thread (kind
// tulip.ThreadBusy).
type ThreadBusyError struct {
	// ThreadID is the thread, RunID its open run.
	ThreadID string
	RunID    string
}

func (e *ThreadBusyError) Error() string { return e.err().Error() }

// Kind is tulip.ThreadBusy.
func (e *ThreadBusyError) Kind() tulip.ErrorKind { return tulip.ThreadBusy }

// NotInterruptedError: a resume for a run that is closed (kind
// tulip.NotInterrupted).
type NotInterruptedError struct {
	// WorkflowID is the run's workflow ID.
	WorkflowID string
}

func (e *NotInterruptedError) Error() string { return e.err().Error() }

// Kind is tulip.NotInterrupted.
func (e *NotInterruptedError) Kind() tulip.ErrorKind { return tulip.NotInterrupted }

// NondeterminismError: the run's workflow task fails on every attempt
// because the workers polling it run code that does not replay its history
// (kind tulip.Nondeterminism): a change deployed under the open run
// without Worker Deployment Versioning. Waiting for the run returns it as
// soon as the server reports the failed task; the run is not failed, and
// goes on when workers that can replay it poll again (roll back, then
// deploy on a version: docs/deploy.md).
type NondeterminismError struct {
	// WorkflowID and RunID are the run whose task fails.
	WorkflowID, RunID string
	// EventID is the WorkflowTaskFailed event in its history.
	EventID int64
	// Message is the worker's report, for a person.
	Message string
}

func (e *NondeterminismError) Error() string { return e.err().Error() }

// Kind is tulip.Nondeterminism.
func (e *NondeterminismError) Kind() tulip.ErrorKind { return tulip.Nondeterminism }

// RunFailedError: the run failed, or was terminated, timed out or
// cancelled. Its kind (tulip.KindOf) is the failure's; Result holds the
// run's trace when it left one.
type RunFailedError struct {
	// Result is the run's result when it left one (its trace, its error).
	Result *Result
	// Err is the failure as the SDK returned it.
	Err error
	msg string
}

func (e *RunFailedError) Error() string { return e.msg }

// Unwrap is Err.
func (e *RunFailedError) Unwrap() error { return e.Err }

// Kind is the failure's tulip kind: its type when tulip raised it, else
// tulip.RunFailed.
func (e *RunFailedError) Kind() tulip.ErrorKind {
	if k := tulip.KindOf(e.Err); k != "" {
		return k
	}
	return tulip.RunFailed
}
