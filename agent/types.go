package agent

import (
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// Result is a run's result: its status, answer, trace, interrupt (when
// interrupted) and the thread's state after it.
type Result = agentrun.RunResult

// The statuses of a Result.
const (
	Running     = agentrun.StatusRunning
	Interrupted = agentrun.StatusInterrupted
	Completed   = agentrun.StatusCompleted
	Failed      = agentrun.StatusFailed
)

// TraceLine is one settled tool call: its turn, tool, arguments, outcome,
// result, downstream key, and for a served call the line it was served
// from.
type TraceLine = agentrun.TraceLine

// Outcome is how a call was settled.
type Outcome = agentrun.Outcome

// The outcomes. On the wire (JSON, docs/scenarios.md) Served is spelled
// "cached", as clients already read it.
const (
	Executed  = agentrun.OutcomeExecuted
	Served    = agentrun.OutcomeCached
	Cancelled = agentrun.OutcomeCancelled
	Held      = agentrun.OutcomeHeld
	Dangling  = agentrun.OutcomeDangling
	Dropped   = agentrun.OutcomeDropped
	Rejected  = agentrun.OutcomeRejected
)

// Record is one entry of an execution log: a call's tool, canonical
// arguments, outcome and downstream key.
type Record = dedup.Record

// Interrupt is a paused run's question: its id, the hook and reason, and
// the held calls.
type Interrupt = agentrun.Interrupt

// ResumeInput answers an interrupt (Approve and Decline make one).
type ResumeInput = agentrun.ResumeInput

// ToolResult is a client tool's result for one held call (ClientResults):
// Output is JSON text, or any text (a JSON string then); IsError makes it
// the call's error.
type ToolResult = agentrun.ToolResult

// ClientToolsHook is the Hook of an interrupt that waits for the client
// tools' results (Options.ClientTools).
const ClientToolsHook = agentrun.ClientToolsHook

// ResumeResult is what a resume did.
type ResumeResult = agentrun.ResumeResult

// ThreadBusyError: a run is already open on the thread (kind
// tulip.ThreadBusy).
type ThreadBusyError = runclient.ThreadBusyError

// NotInterruptedError: a resume for a run that is closed (kind
// tulip.NotInterrupted).
type NotInterruptedError = runclient.NotInterruptedError

// RunFailedError: the run failed, or was terminated, timed out or
// cancelled. Its kind (tulip.KindOf) is the failure's; Result holds the
// run's trace when it left one.
type RunFailedError = runclient.RunFailedError
