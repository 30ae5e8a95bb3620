package runclient

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
)

// FetchHistory is one run's history (runID "": the newest), its payloads
// as the server stores them.
func FetchHistory(ctx context.Context, c client.Client, workflowID, runID string) (*historypb.History, error) {
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %v", workflowID, err)
		}
		hist.Events = append(hist.Events, ev)
	}
	if len(hist.Events) == 0 {
		return nil, fmt.Errorf("history of %s is empty", workflowID)
	}
	return hist, nil
}

// ContinuedFrom is the run a history's run continued as new from, or "".
func ContinuedFrom(hist *historypb.History) string {
	return hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
}

// HistoryFiles names the files of n histories written to out: out itself
// for one, out-1.ext ... out-n.ext for more.
func HistoryFiles(out string, n int) []string {
	if n == 1 {
		return []string{out}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(out, filepath.Ext(out)), i+1, filepath.Ext(out))
	}
	return names
}

// WriteHistory writes hist to name as JSON, as the Temporal CLI and
// ReplayHistories read it, readable by its owner only (a history holds
// prompts, arguments and results), even over a file that was not.
func WriteHistory(name string, hist *historypb.History) error {
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return err
	}
	if err := os.WriteFile(name, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Chmod(name, 0o600)
}
