package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// versionedWorker starts a worker of tq on Worker Deployment Version
// deployment/buildID with the tulip plugin over opts.
func versionedWorker(t *testing.T, c client.Client, tq, deployment, buildID string, opts tulip.Options) sdkworker.Worker {
	t.Helper()
	plugin, err := tulip.NewPlugin(opts)
	require.NoError(t, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin},
		DeploymentOptions: sdkworker.DeploymentOptions{UseVersioning: true,
			Version: sdkworker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: buildID}}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return w
}

// setCurrent makes buildID the deployment's current version, once its
// workers have polled (the server knows the version).
func setCurrent(t *testing.T, c client.Client, deployment, buildID string) {
	t.Helper()
	h := c.WorkerDeploymentClient().GetHandle(deployment)
	require.Eventually(t, func() bool {
		_, err := h.SetCurrentVersion(context.Background(), client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
		if err != nil {
			t.Logf("set-current-version %s: %v", buildID, err)
		}
		return err == nil
	}, 60*time.Second, 500*time.Millisecond)
}

// versionModel refunds ord-1, then (on a run's first message) pages
// on-call, and answers "answered by NAME": which worker's code ran shows
// in the answer.
func versionModel(name string) tulip.Model {
	return tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		switch {
		case req.Phase == 0 && req.PhaseTurn == 1:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("r%d", req.Turn), Name: "issue_refund",
				Arguments: `{"order_id":"ord-1","amount":20}`}}}, nil
		case req.Phase == 0 && req.PhaseTurn == 2 && req.Messages[0].Content == "refund ord-1":
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "p1", Name: "page_oncall",
				Arguments: `{"case_id":"k-1","summary":"refunded"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "answered by " + name}, nil
	})
}

// Agent runs on a Worker Deployment are pinned: a run open on v1 (its
// refund made, its page waiting for an approval) when v2 becomes current
// ends on v1's code; the
// thread's next run starts on v2's. The refund, asked again on v2, is
// served from the thread's log (billing counts one).
func TestVersionedRunsArePinnedAndThreadsUpgrade(t *testing.T) {
	bill, tb := billedToolbox(t)
	c := dial(t, server.Address())
	tq := taskQueue("versioned")
	deployment := fmt.Sprintf("agent-%d", time.Now().UnixNano())
	opts := func(name string) tulip.Options {
		return tulip.Options{Tools: toolsets(tb.Tools()...), Models: map[string]tulip.Model{"m": versionModel(name)},
			Hooks: map[string]tulip.Hook{"approve_page": tulip.Approve("page_oncall", "pages need a person")}}
	}
	versionedWorker(t, c, tq, deployment, "v1", opts("v1"))
	setCurrent(t, c, deployment, "v1")

	thread := fmt.Sprintf("versioned-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "refund ord-1",
		Hooks: []string{"approve_page"}})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Interrupted, res.Status, res.Error)

	versionedWorker(t, c, tq, deployment, "v2", opts("v2"))
	setCurrent(t, c, deployment, "v2")

	_, err = run.Resume(ctxT(t), agent.Approve(res.Interrupt.ID))
	require.NoError(t, err)
	res, err = run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Equal(t, "answered by v1", res.Answer, "the open run ended on the code it started on")
	require.Len(t, bill.Refunds(), 1)

	run2, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	res2, err := run2.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res2.Status, res2.Error)
	assert.Equal(t, "answered by v2", res2.Answer, "the thread's next run took the current version")
	assert.Equal(t, agent.Cached, outcomeOf(res2.Trace, "r1"), "the refund, asked again on v2, served from the thread's log")
	assert.Len(t, bill.Refunds(), 1, "billing: one refund")
}

// A run pinned on v1 that continues as new after v2 became current goes on
// on v2 (the continuation auto-upgrades, then is pinned there): a long
// run does not stay on old code for as long as it lasts.
func TestContinueAsNewTakesTheCurrentVersion(t *testing.T) {
	_, tb := billedToolbox(t)
	c := dial(t, server.Address())
	tq := taskQueue("versioned-can")
	deployment := fmt.Sprintf("agent-can-%d", time.Now().UnixNano())
	model := func(name string) tulip.Model {
		return tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
			switch req.Turn {
			case 1:
				return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "l1", Name: "lookup_order", Arguments: `{"order_id":"ord-1"}`}}}, nil
			case 2:
				return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "p1", Name: "page_oncall", Arguments: `{"case_id":"k-1","summary":"x"}`}}}, nil
			}
			return tulip.ModelResponse{Text: "answered by " + name}, nil
		})
	}
	opts := func(name string) tulip.Options {
		return tulip.Options{Tools: toolsets(tb.Tools()...), Models: map[string]tulip.Model{"m": model(name)},
			Hooks: map[string]tulip.Hook{"approve_page": tulip.Approve("page_oncall", "pages need a person")}}
	}
	versionedWorker(t, c, tq, deployment, "v1", opts("v1"))
	setCurrent(t, c, deployment, "v1")
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", ThreadID: fmt.Sprintf("versioned-can-%d", time.Now().UnixNano()),
		Message: "look it up and page", Hooks: []string{"approve_page"}, ContinueAfterTurns: 2})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Interrupted, res.Status, res.Error)

	versionedWorker(t, c, tq, deployment, "v2", opts("v2"))
	setCurrent(t, c, deployment, "v2")
	_, err = run.Resume(ctxT(t), agent.Approve(res.Interrupt.ID))
	require.NoError(t, err)
	res, err = run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.GreaterOrEqual(t, res.ContinuedAsNew, 1)
	assert.Equal(t, "answered by v2", res.Answer, "after its continue-as-new the run went on on the current version")
}

// The CLI's workers take a Worker Deployment Version (--deployment,
// --build-id) and `tulip set-current-version` makes it current: tulip
// serve's run then executes on that version, pinned (the server says so).
// The two flags go together.
// requestVersioning asks tulip serve at base (its URL, before /v1) for a
// refund and returns the versioning of the thread's run: the build it
// ran on, and how.
func requestVersioning(t *testing.T, base string) *workflowpb.WorkflowExecutionVersioningInfo {
	t.Helper()
	oc := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	r, err := oc.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "support",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please refund ord-7")}})
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusCompleted, r.Status)
	var meta struct {
		Metadata struct {
			Thread string `json:"tulip_thread"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.RawJSON()), &meta))
	desc, err := dial(t, server.Address()).DescribeWorkflowExecution(ctxT(t), meta.Metadata.Thread, "")
	require.NoError(t, err)
	return desc.GetWorkflowExecutionInfo().GetVersioningInfo()
}

func TestCLIDeployment(t *testing.T) {
	m := newServeModel(t, 0)
	deployment := fmt.Sprintf("cli-agent-%d", time.Now().UnixNano())
	tq := taskQueue(t.Name())
	base, _ := startServe(t, "--address", server.Address(), "--task-queue", tq, "--base-url", m.URL+"/v1", "--model", "scripted",
		"--deployment", deployment, "--build-id", "b1")
	stdout, stderr, code := runCLI(t, "set-current-version", "--deployment", deployment, "--build-id", "b1", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "current version b1")

	vi := requestVersioning(t, base)
	assert.Equal(t, "b1", vi.GetDeploymentVersion().GetBuildId(), "the run ran on the deployment's version")
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, vi.GetBehavior())

	_, stderr, code = runCLI(t, "chat", "--deployment", deployment, "--base-url", m.URL+"/v1", "--model", "scripted", "hi")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--deployment and --build-id go together")
}
