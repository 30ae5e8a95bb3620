package agent

import (
	"github.com/tulip-temporal/tulip/dedup"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/workflow"
)

// Result is a run's result: its status, answer, trace, interrupt (when
// interrupted) and the thread's state after it.
type Result = workflow.RunResult

// The statuses of a Result.
const (
	Running     = workflow.StatusRunning
	Interrupted = workflow.StatusInterrupted
	Completed   = workflow.StatusCompleted
	Failed      = workflow.StatusFailed
)

// TraceLine is one settled tool call: its turn, tool, arguments, outcome,
// result, downstream key, and for a served call the line it was served
// from.
type TraceLine = workflow.TraceLine

// Outcome is how a call was settled.
type Outcome = workflow.Outcome

// The outcomes. On the wire (JSON, docs/scenarios.md) Served is spelled
// "cached", as clients already read it.
const (
	Executed  = workflow.OutcomeExecuted
	Served    = workflow.OutcomeCached
	Cancelled = workflow.OutcomeCancelled
	Held      = workflow.OutcomeHeld
	Dangling  = workflow.OutcomeDangling
	Dropped   = workflow.OutcomeDropped
	Rejected  = workflow.OutcomeRejected
)

// Record is one entry of an execution log: a call's tool, canonical
// arguments, outcome and downstream key.
type Record = dedup.Record

// Interrupt is a paused run's question: its id, the hook and reason, and
// the held calls.
type Interrupt = workflow.Interrupt

// ResumeInput answers an interrupt (Approve and Decline make one).
type ResumeInput = workflow.ResumeInput

// ResumeResult is what a resume did.
type ResumeResult = workflow.ResumeResult

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
