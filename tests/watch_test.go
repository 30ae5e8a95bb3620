package tests

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// rpcCounter counts a client's calls by method, and fails
// ListWorkflowExecutions when refuseList is set (as a server without the
// SQL-like queries does).
type rpcCounter struct {
	mu         sync.Mutex
	calls      map[string]int
	refuseList bool
}

func (r *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.mu.Lock()
	r.calls[method]++
	refuse := r.refuseList
	r.mu.Unlock()
	if refuse && method == workflowservice.WorkflowService_ListWorkflowExecutions_FullMethodName {
		return status.Error(codes.InvalidArgument, "invalid query (the test's)")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *rpcCounter) count(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

// Runs awaited at once in one process are watched by one listing a tick
// (the runs' interrupt memos, from visibility), not a describe of each
// run each tick: 16 runs that answer their model after 2 s twice, then
// stop for an approval, are each seen interrupted, with at most three
// describes a run (one each WatchedPollInterval, one to read the
// interrupt). The controls: the watch off (a describe a run each
// tick: at least 4 a run), and listings refused by the server (the
// Awaits see the interrupts by describing, as without the watch).
func TestAwaitWatchesInterrupts(t *testing.T) {
	const runs = 16
	for _, arm := range []string{"watched", "unwatched", "listing-refused"} {
		t.Run(arm, func(t *testing.T) {
			counter := &rpcCounter{calls: map[string]int{}, refuseList: arm == "listing-refused"}
			c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quietLogger(),
				ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.intercept)}}})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			if arm == "unwatched" {
				runclient.WatchInterrupts = false
				t.Cleanup(func() { runclient.WatchInterrupts = true })
			}
			script := scenario.Run{Turns: []scenario.Turn{
				turn(call("c1", "lookup_order", `{"order_id": "ord-1"}`)),
				turn(call("c2", "isolate_host", `{"host": "web-1"}`)),
			}}.Model()
			slow := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
				time.Sleep(2 * time.Second)
				return script.Respond(ctx, req)
			})
			tq := taskQueue("watch")
			startWorker(t, dial(t, server.Address()), tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(),
				Models: map[string]activities.Model{"slow": slow}})
			var handles []runclient.Handle
			for i := range runs {
				h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "slow", Hooks: []string{"approve_isolate_host"},
					WorkflowID: fmt.Sprintf("%s-%d", tq, i)})
				require.NoError(t, err)
				handles = append(handles, h)
			}
			describes := counter.count(workflowservice.WorkflowService_DescribeWorkflowExecution_FullMethodName)
			var seen atomic.Int32
			var wg sync.WaitGroup
			for _, h := range handles {
				wg.Go(func() {
					res, err := runclient.Await(ctxT(t), c, h, "")
					if assert.NoError(t, err) && assert.Equal(t, agentrun.StatusInterrupted, res.Status) {
						assert.Equal(t, "isolate_host", res.Interrupt.Held[0].Name)
						seen.Add(1)
					}
				})
			}
			wg.Wait()
			for _, h := range handles {
				_ = c.TerminateWorkflow(ctxT(t), h.WorkflowID, "", "the test is over")
			}
			require.EqualValues(t, runs, seen.Load())
			perRun := float64(counter.count(workflowservice.WorkflowService_DescribeWorkflowExecution_FullMethodName)-describes) / runs
			lists := counter.count(workflowservice.WorkflowService_ListWorkflowExecutions_FullMethodName)
			t.Logf("%s: %.1f describes a run, %d listings", arm, perRun, lists)
			switch arm {
			case "watched":
				assert.LessOrEqual(t, perRun, 3.0)
				assert.Positive(t, lists)
			case "unwatched":
				assert.GreaterOrEqual(t, perRun, 4.0)
				assert.Zero(t, lists)
			case "listing-refused":
				assert.GreaterOrEqual(t, perRun, 4.0)
				assert.Positive(t, lists)
			}
		})
	}
}
