package runclient

import (
	"context"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip"
)

// NondeterminismError: the run's workflow task fails on every attempt
// because the workers polling it run code that does not replay its
// history (a change deployed under an open run without Worker Deployment
// Versioning, or without workflow.GetVersion). The server says so with the
// failed task's cause, NON_DETERMINISTIC_ERROR. The run is not failed: it
// waits, nothing of it lost, until workers that can replay it poll again
// (a rollback), or it is reset or terminated.
type NondeterminismError struct {
	// Handle is the run whose task fails.
	Handle Handle
	// EventID is the WorkflowTaskFailed event in its history.
	EventID int64
	// Message is the worker's first line (for a person; never matched).
	Message string
}

func (e *NondeterminismError) Error() string {
	return fmt.Sprintf("agent run %s (run %s) cannot go on: the workers' code does not replay its history (event %d: %s); roll the workers back, or deploy on a Worker Deployment Version (docs/deploy.md)",
		e.Handle.WorkflowID, e.Handle.RunID, e.EventID, strings.SplitN(e.Message, "\n", 2)[0])
}

// Kind is tulip.Nondeterminism.
func (e *NondeterminismError) Kind() tulip.ErrorKind { return tulip.Nondeterminism }

// nondeterministic returns a *NondeterminismError when h's workflow task
// is being retried (its attempt is 2 or more) after a failure whose cause
// is NON_DETERMINISTIC_ERROR, with no task completed since; nil otherwise,
// and on any error (Await asks again on its next tick). Only a retried
// task's history is read.
func nondeterministic(ctx context.Context, c client.Client, h Handle) *NondeterminismError {
	desc, err := c.DescribeWorkflowExecution(ctx, h.WorkflowID, h.RunID)
	if err != nil || desc.GetPendingWorkflowTask().GetAttempt() < 2 {
		return nil
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	it := c.GetWorkflowHistory(ctx, h.WorkflowID, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var found *NondeterminismError
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			found = nil
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			found = nil
			if a := ev.GetWorkflowTaskFailedEventAttributes(); a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR {
				found = &NondeterminismError{Handle: Handle{WorkflowID: h.WorkflowID, RunID: run}, EventID: ev.GetEventId(), Message: a.GetFailure().GetMessage()}
			}
		}
	}
	return found
}
