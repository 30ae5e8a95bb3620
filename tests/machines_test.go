package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/tulip-temporal/tulip/internal/scenario"
)

// A thread whose runs were all deleted (as retention deletes them)
// continues on another machine: 'tulip chat' in a second process, with an
// empty home and state directory of its own, sharing only the Temporal
// server and an S3 bucket (--thread-store s3://...) with the process that
// ran the refund. The repeat is served: the trace says so, and the
// server's history of the run schedules no refund. On one machine with
// no store given, the CLI worker's state directory serves it too (the
// issue's probe: 'chat --address', every run deleted). Control: the same two
// processes with no shared store (each keeps threads in its own state
// directory) run the refund again.
func TestThreadContinuesOnAnotherMachine(t *testing.T) {
	bin := tulipBinary(t)
	srv := sharedS3(t)
	c := dial(t, server.Address())
	for _, tc := range []struct {
		name           string
		shared         bool
		secondMachine  string
		wantSecondCall string
	}{
		{"shared S3 store", true, "machine-b", "cached"},
		// The same machine, no flag: a CLI worker on a named server keeps
		// threads in the user's state directory, so the refund is served.
		{"one machine, no store given", false, "machine-a", "cached"},
		{"control: no shared store", false, "machine-b", "executed"},
	} {
		shared := tc.shared
		t.Run(tc.name, func(t *testing.T) {
			thread := taskQueue("machines")
			store := fmt.Sprintf("s3://%s/%s/?endpoint=%s&region=%s", srv.Bucket, thread, srv.Endpoint, srv.Region)
			refund := [3]string{"call_a", "issue_refund", `{"order_id": "ord-7001", "amount": 12}`}
			f := newFakeOpenAI(t, toolCalls(refund), answer("Refunded."), toolCalls(refund), answer("It went through."))
			homes := t.TempDir()
			chat := func(machine string) scenario.Line {
				home := filepath.Join(homes, machine)
				require.NoError(t, os.MkdirAll(home, 0o700))
				args := []string{"chat", "--base-url", f.URL + "/v1", "--model", "m", "--json", "--address", server.Address(), "--thread", thread}
				if shared {
					args = append(args, "--thread-store", store)
				}
				cmd := exec.Command(bin, append(args, "refund ord-7001")...)
				cmd.Dir = home
				cmd.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "TMPDIR="+home,
					"AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey, "AWS_REGION="+srv.Region)
				out, err := cmd.Output()
				require.NoError(t, err, "%s", out)
				lines, _ := parseTrace(t, string(out))
				require.NotEmpty(t, lines)
				return lines[0]
			}
			first := chat("machine-a")
			require.Equal(t, "executed", string(first.Outcome))

			resp, err := c.ListWorkflow(ctxT(t), &workflowservice.ListWorkflowExecutionsRequest{Query: `WorkflowId = "` + thread + `"`})
			require.NoError(t, err)
			require.NotEmpty(t, resp.GetExecutions())
			for _, e := range resp.GetExecutions() {
				deleteRun(t, c, thread, e.GetExecution().GetRunId())
			}

			second := chat(tc.secondMachine)
			if tc.wantSecondCall == "executed" {
				assert.Equal(t, "executed", string(second.Outcome), "control: without a shared store the thread started empty and the refund ran again")
				return
			}
			assert.Equal(t, "cached", string(second.Outcome), "the refund is served from the thread's store")
			d, err := c.DescribeWorkflowExecution(ctxT(t), thread, "")
			require.NoError(t, err)
			for _, ev := range history(t, c, thread, d.GetWorkflowExecutionInfo().GetExecution().GetRunId()).GetEvents() {
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					assert.NotContains(t, a.GetActivityType().GetName(), "issue_refund", "the refund's body was not scheduled")
				}
			}
		})
	}
}
