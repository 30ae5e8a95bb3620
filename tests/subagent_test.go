package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/runclient"
	tulipotel "github.com/tulip-temporal/tulip/otel"
)

// subAgentHistory is a recorded parent run that called an idempotent
// sub-agent twice with the same task (TULIP_RECORD_HISTORIES=1 re-records
// it): it replays with no child history.
const subAgentHistory = "testdata/subagent/parent.json"

// subAgentOptions: the demo toolbox over billing, the sub-agent tool
// "refunds" (idempotent; with hooks, the refund asks approval inside the
// sub-agent), the parent's model, which asks the sub-agent to refund
// ord-1 twice and then answers with the sub-agent's answer, and the
// sub-agent's, which refunds the order its task names.
func subAgentOptions(t testing.TB, tb *demo.Toolbox, hooks ...string) tulip.Options {
	refunds, err := tulip.AgentTool(tulip.ToolSpec{Name: "refunds", Idempotent: true, Description: "a refunds specialist"},
		tulip.AgentToolOptions{Model: "sub", Hooks: hooks})
	require.NoError(t, err)
	task := `{"task":"ord-1"}`
	parent := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if req.Turn <= 2 {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("p%d", req.Turn), Name: "refunds", Arguments: task}}}, nil
		}
		return tulip.ModelResponse{Text: "the specialist says: " + req.Messages[len(req.Messages)-1].Content}, nil
	})
	sub := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		order := req.Messages[len(req.Messages)-1].Content
		if req.Messages[len(req.Messages)-1].Role == "user" && req.Phase == 0 {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "s1", Name: "issue_refund", Arguments: `{"order_id":"` + order + `","amount":20}`}}}, nil
		}
		return tulip.ModelResponse{Text: "refunded"}, nil
	})
	return tulip.Options{Tools: append(toolsets(tb.Tools()...), refunds), Models: map[string]tulip.Model{"parent": parent, "sub": sub},
		Hooks: map[string]tulip.Hook{"approve_refund": tulip.Approve("issue_refund", "refunds need a person")}}
}

// childStarts counts the child workflows a run's history started.
func childStarts(t *testing.T, thread string) int {
	n := 0
	for _, ev := range history(t, dial(t, server.Address()), thread, "").Events {
		if ev.GetStartChildWorkflowExecutionInitiatedEventAttributes() != nil {
			n++
		}
	}
	return n
}

// A parent calls an idempotent sub-agent twice with the same task: one
// child workflow starts (the second call is served from the parent's
// log), billing refunds once, and the sub-agent's own thread holds its
// log. The parent's history replays alone. With the refund asking
// approval inside the sub-agent, the parent is interrupted (the held
// call names the sub-agent's path), and the parent's resume answers it.
func TestSubAgentServedOnceAndApprovedThroughTheParent(t *testing.T) {
	c := dial(t, server.Address())
	for _, approval := range []bool{false, true} {
		t.Run(fmt.Sprintf("approval=%v", approval), func(t *testing.T) {
			bill, tb := billedToolbox(t)
			var hooks []string
			if approval {
				hooks = []string{"approve_refund"}
			}
			opts := subAgentOptions(t, tb, hooks...)
			tq := taskQueue("subagent")
			startPublicWorker(t, c, tq, opts)
			thread := fmt.Sprintf("parent-%d", time.Now().UnixNano())
			run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "parent", ThreadID: thread, Message: "refund ord-1"})
			require.NoError(t, err)
			var items []string
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				_ = run.Watch(ctxT(t), 0, func(ev agent.Event) error {
					if ev.Call != nil {
						items = append(items, strings.TrimSpace(ev.Call.Agent+" "+ev.Call.Tool+" "+string(ev.Call.Outcome)))
					}
					return nil
				})
			}()
			res, err := run.Await(ctxT(t))
			require.NoError(t, err)
			if approval {
				require.Equal(t, agent.Interrupted, res.Status, res.Error)
				assert.Equal(t, "support/refunds", res.Interrupt.Agent)
				assert.Equal(t, "approve_refund", res.Interrupt.Hook)
				require.Len(t, res.Interrupt.Held, 1)
				assert.Equal(t, "issue_refund", res.Interrupt.Held[0].Name)
				assert.Empty(t, bill.Refunds(), "nothing refunded before the approval")
				_, err = run.Resume(ctxT(t), agent.Approve(res.Interrupt.ID))
				require.NoError(t, err)
				res, err = run.Await(ctxT(t))
				require.NoError(t, err)
			}
			require.Equal(t, agent.Completed, res.Status, res.Error)
			var outcomes []string
			for _, l := range res.Trace {
				outcomes = append(outcomes, strings.TrimSpace(fmt.Sprintf("%s %s %s", l.Tool, l.Outcome, l.Relation)))
			}
			assert.Equal(t, []string{"refunds executed", "refunds cached earlier_turn"}, outcomes)
			assert.Contains(t, res.Answer, `"answer":"refunded"`)
			assert.Contains(t, res.Answer, thread+"/sub/refunds")
			assert.Equal(t, 1, childStarts(t, thread), "one child workflow")
			assert.Len(t, bill.Refunds(), 1, "billing: one refund")
			if !approval { // an approved call runs unrecorded (a resume's dangling call, docs/rules.md)
				recs, err := runclient.ThreadLog(ctxT(t), c, thread+"/sub/refunds", "refunds")
				require.NoError(t, err)
				require.NotEmpty(t, recs)
				assert.Equal(t, "issue_refund", recs[0].Tool)
				// The parent's stream carried the sub-agent's call, with
				// its path, before the parent's own.
				<-watched
				assert.Equal(t, []string{"support/refunds issue_refund executed", "refunds executed", "refunds cached"}, items)
				stdout, stderr, code := runCLI(t, "inspect", thread, "--address", server.Address())
				require.Equal(t, 0, code, stderr)
				assert.Contains(t, stdout, "sub-agent thread "+thread+"/sub/refunds: 1 calls ran it, 1 served from this log")
			}

			// The parent's history replays with no child history.
			file := filepath.Join(t.TempDir(), "parent.json")
			if !approval && os.Getenv("TULIP_RECORD_HISTORIES") == "1" {
				file = subAgentHistory
			}
			writeHistory(t, c, runclient.Handle{WorkflowID: thread}, file)
			assert.NoError(t, tulip.ReplayHistories(subAgentOptions(t, demo.NewToolbox(), hooks...), tulip.ReplayOptions{}, file))
		})
	}
}

// The recorded parent run replays under the current code.
func TestReplaySubAgentHistory(t *testing.T) {
	require.NoError(t, tulip.ReplayHistories(subAgentOptions(t, demo.NewToolbox()), tulip.ReplayOptions{}, subAgentHistory))
}

// A sub-agent on its own task queue, whose worker process is killed
// (SIGKILL) after billing made the refund and before the activity
// completed: a new worker process takes the sub-agent's run over, the
// parent gets its answer, billing holds one refund, and one child
// workflow ran.
func TestSubAgentWorkerKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGKILL of a child process: Linux only")
	}
	bin := crashWorker(t)
	bill, err := billing.Start()
	require.NoError(t, err)
	t.Cleanup(bill.Close)
	c := dial(t, server.Address())
	subTQ, parentTQ := taskQueue("sub-killed"), taskQueue("parent-killed")
	marker := filepath.Join(t.TempDir(), "crashed")
	first := startProcess(t, bin, subTQ, bill.URL(), "after-billing", marker)
	refunds, err := tulip.AgentTool(tulip.ToolSpec{Name: "refunds"}, tulip.AgentToolOptions{TaskQueue: subTQ, Model: "refund"})
	require.NoError(t, err)
	parent := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if req.Turn == 1 {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "p1", Name: "refunds", Arguments: `{"task":"ord-killed"}`}}}, nil
		}
		return tulip.ModelResponse{Text: req.Messages[len(req.Messages)-1].Content}, nil
	})
	startPublicWorker(t, c, parentTQ, tulip.Options{Tools: []tulip.Toolset{refunds}, Models: map[string]tulip.Model{"parent": parent}})
	thread := fmt.Sprintf("parent-killed-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: parentTQ, Model: "parent", ThreadID: thread, Message: "refund it"})
	require.NoError(t, err)
	awaitKilled(t, first, "the sub-agent's worker")
	second := startProcess(t, bin, subTQ, bill.URL(), "", "")
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Contains(t, res.Answer, `"answer":"refunded"`)
	rs := bill.Refunds()
	require.Len(t, rs, 1, "billing: one refund")
	assert.Equal(t, "ord-killed", rs[0].OrderID)
	assert.Equal(t, 1, childStarts(t, thread))
}

// Cancelling or terminating a parent whose sub-agent waits for an
// approval ends the sub-agent's run too.
func TestSubAgentEndsWithItsParent(t *testing.T) {
	c := dial(t, server.Address())
	tb := demo.NewToolbox()
	tq := taskQueue("subagent-end")
	startPublicWorker(t, c, tq, subAgentOptions(t, tb, "approve_refund"))
	for _, how := range []string{"cancel", "terminate"} {
		t.Run(how, func(t *testing.T) {
			thread := fmt.Sprintf("parent-%s-%d", how, time.Now().UnixNano())
			run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "parent", ThreadID: thread, Message: "refund ord-1"})
			require.NoError(t, err)
			res, err := run.Await(ctxT(t))
			require.NoError(t, err)
			require.Equal(t, agent.Interrupted, res.Status)
			if how == "cancel" {
				require.NoError(t, c.CancelWorkflow(ctxT(t), thread, ""))
			} else {
				require.NoError(t, c.TerminateWorkflow(ctxT(t), thread, "", "test"))
			}
			child := thread + "/sub/refunds"
			require.Eventually(t, func() bool {
				d, err := c.DescribeWorkflowExecution(ctxT(t), child, "")
				return err == nil && d.GetWorkflowExecutionInfo().GetCloseTime() != nil
			}, 30*time.Second, 100*time.Millisecond, "the sub-agent's run ends")
			d, err := c.DescribeWorkflowExecution(ctxT(t), child, "")
			require.NoError(t, err)
			t.Logf("%s: child %s", how, d.GetWorkflowExecutionInfo().GetStatus())
			assert.Zero(t, tb.Invocations()["issue_refund"])
		})
	}
}

// Two sub-agents called in one response, each asking approval inside:
// the parent raises one interrupt, then the other, and its two resumes
// answer both (each reaches its own sub-agent).
func TestTwoSubAgentsInterruptInTurn(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	opts := subAgentOptions(t, tb, "approve_refund")
	second, err := tulip.AgentTool(tulip.ToolSpec{Name: "refunds2"}, tulip.AgentToolOptions{Model: "sub", Hooks: []string{"approve_refund"}})
	require.NoError(t, err)
	opts.Tools = append(opts.Tools, second)
	opts.Models["both"] = tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if req.Turn == 1 {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "p1", Name: "refunds", Arguments: `{"task":"ord-a"}`},
				{ID: "p2", Name: "refunds2", Arguments: `{"task":"ord-b"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "both done"}, nil
	})
	tq := taskQueue("subagent-two")
	startPublicWorker(t, c, tq, opts)
	thread := fmt.Sprintf("parent-two-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "both", ThreadID: thread, Message: "refund both"})
	require.NoError(t, err)
	var agents []string
	res, err := run.Await(ctxT(t))
	for i := 0; err == nil && res.Status == agent.Interrupted && i < 4; i++ {
		agents = append(agents, res.Interrupt.Agent)
		_, err = run.Resume(ctxT(t), agent.Approve(res.Interrupt.ID))
		require.NoError(t, err)
		res, err = run.Await(ctxT(t))
	}
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.ElementsMatch(t, []string{"support/refunds", "support/refunds2"}, agents)
	var orders []string
	for _, rc := range bill.Refunds() {
		orders = append(orders, rc.OrderID)
	}
	assert.ElementsMatch(t, []string{"ord-a", "ord-b"}, orders)
}

// A later parent run hands the sub-agent another task: the sub-agent's
// thread has runs, so its run continues it (its log holds both refunds).
func TestSubAgentThreadContinues(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	opts := subAgentOptions(t, tb)
	opts.Models["second"] = tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if req.Turn == 1 {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "q1", Name: "refunds", Arguments: `{"task":"ord-2"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "done"}, nil
	})
	tq := taskQueue("subagent-continue")
	startPublicWorker(t, c, tq, opts)
	thread := fmt.Sprintf("parent-continue-%d", time.Now().UnixNano())
	for _, model := range []string{"parent", "second"} {
		run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: model, ThreadID: thread, Message: "go"})
		require.NoError(t, err)
		res, err := run.Await(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, agent.Completed, res.Status, res.Error)
	}
	recs, err := runclient.ThreadLog(ctxT(t), c, thread+"/sub/refunds", "refunds")
	require.NoError(t, err)
	var refunded []string
	for _, r := range recs {
		if r.Tool == "issue_refund" {
			refunded = append(refunded, string(r.Arguments))
		}
	}
	assert.Equal(t, []string{`{"order_id":"ord-1","amount":20}`, `{"order_id":"ord-2","amount":20}`}, refunded)
	assert.Len(t, bill.Refunds(), 2)
}

// Nested sub-agents: the top run calls b, b calls c, and c's refund asks
// approval. The question reaches the top run naming c's path, and the
// top run's resume reaches c through b. The spans show the tree: each
// run's agent path, and the workflow of the run that called it.
func TestNestedSubAgentApproval(t *testing.T) {
	c := dial(t, server.Address())
	bill, tb := billedToolbox(t)
	opts := subAgentOptions(t, tb)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	opts.Observer = tulipotel.NewObserver(tp.Tracer("tulip"))
	b, err := tulip.AgentTool(tulip.ToolSpec{Name: "b"}, tulip.AgentToolOptions{Model: "mid"})
	require.NoError(t, err)
	cc, err := tulip.AgentTool(tulip.ToolSpec{Name: "c"}, tulip.AgentToolOptions{Model: "sub", Hooks: []string{"approve_refund"}})
	require.NoError(t, err)
	opts.Tools = append(opts.Tools, b, cc)
	delegate := func(tool string) tulip.Model {
		return tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
			if req.Turn == 1 {
				return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "d1", Name: tool, Arguments: `{"task":"ord-n"}`}}}, nil
			}
			return tulip.ModelResponse{Text: tool + " answered"}, nil
		})
	}
	opts.Models["top"], opts.Models["mid"] = delegate("b"), delegate("c")
	tq := taskQueue("subagent-nested")
	startPublicWorker(t, c, tq, opts)
	thread := fmt.Sprintf("nested-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "top", ThreadID: thread, Message: "go"})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Interrupted, res.Status, res.Error)
	assert.Equal(t, "support/b/c", res.Interrupt.Agent)
	assert.Empty(t, bill.Refunds())
	_, err = run.Resume(ctxT(t), agent.Approve(res.Interrupt.ID))
	require.NoError(t, err)
	res, err = run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Len(t, bill.Refunds(), 1)
	assert.Equal(t, 1, childStarts(t, thread))
	assert.Equal(t, 1, childStarts(t, thread+"/sub/b"))

	// span name and tool (or model) -> path and caller
	tree := map[string][2]string{}
	for _, s := range exp.GetSpans() {
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		tree[s.Name+" "+attrs["tulip.tool"]+attrs["tulip.model"]] = [2]string{attrs["tulip.agent.path"], attrs["tulip.parent.workflow_id"]}
	}
	assert.Equal(t, [2]string{"support", ""}, tree["tulip.model top"])
	assert.Equal(t, [2]string{"support", ""}, tree["tulip.decision b"])
	assert.Equal(t, [2]string{"support/b", thread}, tree["tulip.decision c"])
	assert.Equal(t, [2]string{"support/b/c", thread + "/sub/b"}, tree["tulip.decision issue_refund"])
	assert.Equal(t, [2]string{"support/b/c", thread + "/sub/b"}, tree["tulip.model sub"])
}

// Each agent on one worker names its tools, and a sub-agent is never
// offered itself. The parent is offered lookup_order and the "refunds"
// sub-agent; its call of issue_refund, which it was not offered, is
// rejected (billing is not reached). The sub-agent is offered
// issue_refund alone, refunds through it (billing counts 1), and its call
// of itself is rejected. A sub-agent tool with no Tools is offered every
// tool of the worker but itself. A name the worker lacks fails the run at
// its start with kind BadInput. Before this, every agent on the worker
// was offered every tool, itself included.
func TestSubAgentsHaveTheirOwnTools(t *testing.T) {
	bill, tb := billedToolbox(t)
	var mu sync.Mutex
	offered := map[string][]string{}
	see := func(req tulip.ModelRequest) {
		mu.Lock()
		defer mu.Unlock()
		var names []string
		for _, s := range req.Tools {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		offered[req.Agent] = names
	}
	refunds, err := tulip.AgentTool(tulip.ToolSpec{Name: "refunds", Description: "a refunds specialist"},
		tulip.AgentToolOptions{Model: "sub", Tools: []string{"issue_refund"}})
	require.NoError(t, err)
	helper, err := tulip.AgentTool(tulip.ToolSpec{Name: "helper", Description: "a helper"}, tulip.AgentToolOptions{Model: "sub"})
	require.NoError(t, err)
	parent := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		see(req)
		switch req.Turn {
		case 1:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "p1", Name: "issue_refund", Arguments: `{"order_id":"ord-9","amount":5}`}}}, nil
		case 2:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "p2", Name: "refunds", Arguments: `{"task":"ord-1"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "done"}, nil
	})
	sub := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		see(req)
		if req.Turn == 1 {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{
				{ID: "s1", Name: "issue_refund", Arguments: `{"order_id":"ord-1","amount":20}`},
				{ID: "s2", Name: req.Agent, Arguments: `{"task":"again"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "refunded"}, nil
	})
	c := dial(t, server.Address())
	tq := taskQueue("ownTools")
	startPublicWorker(t, c, tq, tulip.Options{Tools: append(toolsets(tb.Tools()...), refunds, helper),
		Models: map[string]tulip.Model{"parent": parent, "sub": sub}})

	thread := fmt.Sprintf("own-tools-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "parent", ThreadID: thread, Message: "refund ord-1",
		Tools: []string{"lookup_order", "refunds"}})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Equal(t, []string{"lookup_order", "refunds"}, offered["support"], "the parent's tools")
	assert.Equal(t, []string{"issue_refund"}, offered["refunds"], "the sub-agent's tools")
	assert.Equal(t, agent.Rejected, outcomeOf(res.Trace, "p1"), "the parent was not offered issue_refund")
	require.Len(t, bill.Refunds(), 1, "one refund, through the sub-agent")
	assert.Equal(t, "ord-1", bill.Refunds()[0].OrderID)
	assert.Equal(t, 1, childStarts(t, thread), "the sub-agent's call of itself started no child")

	// A sub-agent with no Tools (helper, run as an agent of its own
	// here): every tool of the worker but itself.
	want := []string{"refunds"}
	for _, tl := range tb.Tools() {
		want = append(want, tl.Spec().Name)
	}
	slices.Sort(want)
	hrun, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "sub", Agent: "helper", ThreadID: thread + "-helper", Message: "ord-2"})
	require.NoError(t, err)
	hres, err := hrun.Await(ctxT(t))
	require.NoError(t, err)
	assert.Equal(t, want, offered["helper"], "every tool of the worker but helper itself")
	assert.Equal(t, agent.Rejected, outcomeOf(hres.Trace, "s2"), "helper calling itself")

	// A name the worker lacks.
	run, err = agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "parent", ThreadID: thread + "-bad", Message: "x",
		Tools: []string{"no_such_tool"}})
	require.NoError(t, err)
	_, err = run.Await(ctxT(t))
	require.Error(t, err)
	assert.Equal(t, tulip.BadInput, tulip.KindOf(err), "%v", err)
	assert.Contains(t, err.Error(), "no_such_tool")
}

// outcomeOf is the last outcome a trace gives call id.
func outcomeOf(trace []agent.TraceLine, id string) agent.Outcome {
	var o agent.Outcome
	for _, l := range trace {
		if l.CallID == id {
			o = l.Outcome
		}
	}
	return o
}
