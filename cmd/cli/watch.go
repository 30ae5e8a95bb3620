package cli

import (
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tulip-temporal/tulip/internal/runclient"
)

// watchCmd prints a run live from its stream, started by any client: each
// call's line as it is decided and the model's text as it comes, from the
// oldest item the run keeps, across continue-as-new, until the run closes.
func (e *env) watchCmd(args []string) error {
	fs := e.flags("watch")
	c := e.connFlags(fs)
	db := dbFlag(fs)
	asJSON := fs.Bool("json", false, "print each call's decision as a JSON line (no text)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: tulip watch WORKFLOW_ID [--json]"}
	}
	s, err := e.connect(c, *db != "", *db)
	if err != nil {
		return err
	}
	defer s.Close()
	id := fs.Arg(0)
	desc, err := s.client.DescribeWorkflowExecution(e.ctx, id, "")
	if err != nil {
		return fmt.Errorf("watch %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("watch %s: its run is closed (%s); 'tulip inspect' shows a thread's log", id, statusName(st))
	}
	h := runclient.Handle{WorkflowID: id, RunID: info.GetExecution().GetRunId()}
	e.progress("watching %s (run %s)", id, h.RunID)
	l := e.watch(s.client, h, *asJSON)
	err = <-l.done
	l.mu.Lock()
	l.endText()
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("watch %s: %w", id, err)
	}
	if d, derr := s.client.DescribeWorkflowExecution(e.ctx, id, ""); derr == nil {
		e.progress("%s: %s", id, statusName(d.GetWorkflowExecutionInfo().GetStatus()))
	}
	return nil
}

// statusName is a workflow status in lower case ("completed").
func statusName(st enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_"))
}
