package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// forkWorld is the demo toolbox refunding through a billing service (the
// witness), and scripted models: "origin" looks the order up, refunds it
// and answers; "changed" does the same and then pages on-call, a call the
// origin never made; "same" is "origin" again.
type forkWorld struct {
	tb   *demo.Toolbox
	bill *billing.Server
	tq   string
	opts tulip.Options
}

// forkScript is a scripted model: each turn's calls (by PhaseTurn, the
// turn since the last resume; a turn past the script answers).
func forkScript(turns ...[]tulip.ToolCall) tulip.Model {
	return tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if req.Phase > 0 || req.Turn > len(turns) {
			return tulip.ModelResponse{Text: fmt.Sprintf("done after %d turns", req.Turn-1)}, nil
		}
		return tulip.ModelResponse{ToolCalls: turns[req.Turn-1]}, nil
	})
}

// forkOptions are the worker options of a fork world over tb.
func forkOptions(tb *demo.Toolbox) tulip.Options {
	lookup := []tulip.ToolCall{{ID: "c1", Name: "lookup_order", Arguments: `{"order_id":"ord-1"}`}}
	refund := []tulip.ToolCall{{ID: "c2", Name: "issue_refund", Arguments: `{"order_id":"ord-1","amount":20}`}}
	refundPage := append(refund[:1:1], tulip.ToolCall{ID: "c3", Name: "page_oncall", Arguments: `{"case_id":"k-1","summary":"refund"}`})
	models := map[string]tulip.Model{
		"origin":  forkScript(lookup, refund),
		"same":    forkScript(lookup, refund),
		"changed": forkScript(lookup, refundPage),
		// refunds, and refunds again with the same arguments.
		"twice": forkScript(refund, refund),
	}
	return tulip.Options{Tools: toolsets(tb.Tools()...), Models: models}
}

// forkHistory is the recorded run of the changed fork (held, declined,
// answered; TULIP_RECORD_HISTORIES=1 re-records it): changes to workflow
// code must keep it replaying.
const forkHistory = "testdata/fork/changed.json"

func newForkWorld(t *testing.T) *forkWorld {
	bill, tb := billedToolbox(t)
	w := &forkWorld{tb: tb, bill: bill, tq: taskQueue("fork"), opts: forkOptions(tb)}
	startPublicWorker(t, dial(t, server.Address()), w.tq, w.opts)
	return w
}

// record runs the origin thread: one refund, reaching billing once.
func (w *forkWorld) record(t *testing.T, thread string) {
	c := dial(t, server.Address())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: w.tq, Model: "origin", ThreadID: thread, Message: "refund ord-1"})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status)
	require.Len(t, w.bill.Refunds(), 1)
}

// fork forks thread at response at with model, and waits.
func (w *forkWorld) fork(t *testing.T, thread, forked, model string, at int, live bool) (*agent.Run, *agent.Result) {
	c := dial(t, server.Address())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: w.tq, Model: model, ThreadID: forked,
		ForkOf: thread, ForkAt: at, ForkLive: live})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	return run, res
}

// forkOutcomes are a trace's calls as "tool outcome relation".
func forkOutcomes(trace []agent.TraceLine) []string {
	var out []string
	for _, l := range trace {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s", l.Tool, l.Outcome, l.Relation)))
	}
	return out
}

// A fork of a recorded refund thread with another scripted model: every
// call the origin made is served from the origin's log (relation
// "origin"; no body runs, billing is reached no more), the call it never
// made is held, and declining it lets the fork answer. The fork's thread
// names its origin. With the origin's own model, the fork completes with
// every call served. A fork at response 2 starts with the lookup in its
// own log. A live fork runs the new call.
func TestForkServesFromTheOrigin(t *testing.T) {
	w := newForkWorld(t)
	c := dial(t, server.Address())
	thread := fmt.Sprintf("fork-origin-%d", time.Now().UnixNano())
	w.record(t, thread)
	require.Equal(t, 1, w.tb.Invocations()["issue_refund"])

	// Changed model: the page is new, and held.
	forked := thread + "~changed"
	run, res := w.fork(t, thread, forked, "changed", 1, false)
	require.Equal(t, agent.Interrupted, res.Status, res.Error)
	require.Equal(t, agentrun.ForkHook, res.Interrupt.Hook)
	assert.Equal(t, "page_oncall", res.Interrupt.Held[0].Name)
	assert.Contains(t, res.Interrupt.Reason, "never made it")
	assert.Equal(t, []string{"lookup_order cached origin", "issue_refund cached origin", "page_oncall held"}, forkOutcomes(res.Trace))
	_, err := run.Resume(ctxT(t), agent.Decline(res.Interrupt.ID, "not in a fork"))
	require.NoError(t, err)
	res, err = run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status)
	if os.Getenv("TULIP_RECORD_HISTORIES") == "1" {
		writeHistory(t, c, runclient.Handle{WorkflowID: forked}, forkHistory)
	}
	assert.Len(t, w.bill.Refunds(), 1, "billing: the origin's refund alone")
	assert.Equal(t, map[string]int{"lookup_order": 1, "issue_refund": 1}, nonZero(w.tb.Invocations()))
	// No tool activity in the fork's history: what was served added no
	// event, and what was held never ran.
	h := history(t, c, forked, "")
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			assert.NotContains(t, a.GetActivityType().GetName(), "lookup_order")
			assert.NotContains(t, a.GetActivityType().GetName(), "issue_refund")
		}
	}
	st, err := runclient.Thread(ctxT(t), c, forked)
	require.NoError(t, err)
	require.NotNil(t, st.Fork)
	assert.Equal(t, thread, st.Fork.Thread)
	assert.Equal(t, 1, st.Fork.At)
	recs, err := runclient.LogOf(st, "")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "origin", string(recs[1].Relation))

	// The origin's model: all served, and the fork completes.
	_, res = w.fork(t, thread, thread+"~same", "same", 1, false)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Equal(t, []string{"lookup_order cached origin", "issue_refund cached origin"}, forkOutcomes(res.Trace))
	// A later run on the fork's thread holds what its log does not serve:
	// a fork touches nothing real unless a person approves or it is live.
	run, err = agent.Start(ctxT(t), c, agent.Options{TaskQueue: w.tq, Model: "changed", ThreadID: thread + "~same", Message: "again"})
	require.NoError(t, err)
	res, err = run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Interrupted, res.Status, res.Error)
	assert.Equal(t, agentrun.ForkHook, res.Interrupt.Hook)
	assert.Equal(t, "lookup_order", res.Interrupt.Held[0].Name)
	require.NoError(t, c.TerminateWorkflow(ctxT(t), thread+"~same", "", "test done"))

	// Continued as new after every turn: the chain serves each origin
	// record once, across its runs.
	run, err = agent.Start(ctxT(t), c, agent.Options{TaskQueue: w.tq, Model: "twice", ThreadID: thread + "~chain",
		ForkOf: thread, ContinueAfterTurns: 1})
	require.NoError(t, err)
	res, err = run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.GreaterOrEqual(t, res.ContinuedAsNew, 2)
	assert.Equal(t, []string{"issue_refund cached origin", "issue_refund cached earlier_turn"}, forkOutcomes(res.Trace))

	// At response 2: the refund is served from the origin, and its
	// repeat (an idempotent tool) by the contract's rule. The lookup (not
	// idempotent) is the fork's own record: the origin made it before
	// the fork's point, so a lookup again is new, and held.
	_, res = w.fork(t, thread, thread+"~twice", "twice", 2, false)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Equal(t, []string{"issue_refund cached origin", "issue_refund cached earlier_turn"}, forkOutcomes(res.Trace))
	_, res = w.fork(t, thread, thread+"~again", "same", 2, false)
	require.Equal(t, agent.Interrupted, res.Status, res.Error)
	assert.Equal(t, []string{"lookup_order held"}, forkOutcomes(res.Trace))
	require.NoError(t, c.TerminateWorkflow(ctxT(t), thread+"~again", "", "test done"))

	// Live: the new call runs for real.
	_, res = w.fork(t, thread, thread+"~live", "changed", 1, true)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	assert.Equal(t, []string{"lookup_order cached origin", "issue_refund cached origin", "page_oncall executed"}, forkOutcomes(res.Trace))
	assert.Equal(t, 1, w.tb.Invocations()["page_oncall"])
	assert.Len(t, w.bill.Refunds(), 1)

	// A fork onto a thread that has runs, and past the origin's
	// responses, is refused, in one line.
	_, err = agent.Start(ctxT(t), c, agent.Options{TaskQueue: w.tq, Model: "same", ThreadID: forked, ForkOf: thread})
	require.Error(t, err)
	assert.Equal(t, tulip.BadInput, tulip.KindOf(err))
	_, err = agent.Start(ctxT(t), c, agent.Options{TaskQueue: w.tq, Model: "same", ThreadID: thread + "~far", ForkOf: thread, ForkAt: 9})
	require.Error(t, err)
	assert.Equal(t, tulip.BadInput, tulip.KindOf(err))
	t.Log(err)
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// evalModel is a scripted model that reads the order from the thread's
// first message: it looks the order up, refunds it (20, or 25 for the
// order changed), and answers, reporting tokens.
func evalModel(changed string) tulip.Model {
	return tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		order := strings.TrimPrefix(req.Messages[0].Content, "refund ")
		usage := &tulip.Usage{PromptTokens: 100 * req.Turn, CompletionTokens: 10}
		switch req.Turn {
		case 1:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "c1", Name: "lookup_order", Arguments: `{"order_id":"` + order + `"}`}}, Usage: usage}, nil
		case 2:
			amount := "20"
			if order == changed {
				amount = "25"
			}
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "c2", Name: "issue_refund",
				Arguments: `{"order_id":"` + order + `","amount":` + amount + `}`}}, Usage: usage}, nil
		}
		return tulip.ModelResponse{Text: "refunded " + order, Usage: usage}, nil
	})
}

// evalJSON runs 'tulip eval --json' and decodes its reports.
func evalJSON(t *testing.T, args ...string) ([]map[string]any, int, string) {
	stdout, stderr, code := runCLI(t, append([]string{"eval", "--json"}, args...)...)
	var reports []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), "stdout: %s\nstderr: %s", stdout, stderr)
	return reports, code, stderr
}

// 'tulip eval' over 20 recorded refund threads: with the model they were
// recorded with, all identical and exit 0; with a model that changes one
// decision (ord-7's amount), exactly that thread diverges, at response 2,
// at /amount, and the exit code is 1. Billing is reached by the
// recordings alone. The same threads exported to files evaluate the
// same.
func TestEvalReportsTheOneDivergence(t *testing.T) {
	bill, tb := billedToolbox(t)
	tq := taskQueue("eval")
	c := dial(t, server.Address())
	startPublicWorker(t, c, tq, tulip.Options{Tools: toolsets(tb.Tools()...),
		Models: map[string]tulip.Model{"v1": evalModel(""), "v2": evalModel("ord-7")}})
	prefix := fmt.Sprintf("eval-%d-", time.Now().UnixNano())
	var threads []string
	for i := range 20 {
		thread := fmt.Sprintf("%s%d", prefix, i)
		run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "v1", ThreadID: thread, Message: fmt.Sprintf("refund ord-%d", i)})
		require.NoError(t, err)
		res, err := run.Await(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, agent.Completed, res.Status)
		threads = append(threads, thread)
	}
	require.Len(t, bill.Refunds(), 20)
	target := []string{"--address", server.Address(), "--task-queue", tq}

	reports, code, stderr := evalJSON(t, append(append(target, "--model", "v1"), threads...)...)
	assert.Equal(t, 0, code, stderr)
	require.Len(t, reports, 20)
	for _, r := range reports {
		assert.Equal(t, "identical", r["verdict"], r["thread"])
		assert.EqualValues(t, 2, r["served_from_origin"])
		assert.Equal(t, r["answers"].(map[string]any)["origin"], r["answers"].(map[string]any)["fork"])
		assert.EqualValues(t, 600, r["tokens"].(map[string]any)["fork"].(map[string]any)["prompt_tokens"])
	}

	start := time.Now()
	reports, code, stderr = evalJSON(t, append(append(target, "--model", "v2"), threads...)...)
	t.Logf("eval of 20 threads: %s", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, 1, code, stderr)
	var diverged []map[string]any
	for _, r := range reports {
		if r["verdict"] != "identical" {
			diverged = append(diverged, r)
		}
	}
	require.Len(t, diverged, 1)
	d := diverged[0]
	assert.Equal(t, prefix+"7", d["thread"])
	assert.EqualValues(t, 2, d["diverged_at"])
	diffs := d["first_difference"].(map[string]any)["differences"].([]any)
	require.Len(t, diffs, 1)
	assert.Equal(t, map[string]any{"path": "/amount", "was": 20.0, "now": 25.0}, diffs[0])
	assert.Len(t, d["new_calls"], 1)
	assert.Len(t, d["no_longer_made"], 1)
	assert.EqualValues(t, 1, d["held"])
	assert.Len(t, bill.Refunds(), 20, "billing: the recordings' refunds alone")
	assert.Equal(t, 20, tb.Invocations()["issue_refund"])

	// Text: the divergence in words; a threshold of 1 passes.
	stdout, _, code := runCLI(t, append(append(append([]string{"eval"}, target...), "--model", "v2", "--max-diverged", "1"), threads...)...)
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "diverged at response 2")
	assert.Contains(t, stdout, "/amount: 20 → 25")
	assert.Contains(t, stdout, "20 threads: 19 identical, 1 diverged, 0 failed")

	// Exported to files, the threads evaluate the same.
	dir := t.TempDir()
	_, stderr, code = runCLI(t, append([]string{"export", "--address", server.Address(), "-o", dir}, threads...)...)
	require.Equal(t, 0, code, stderr)
	reports, code, _ = evalJSON(t, append(target, "--model", "v2", dir)...)
	assert.Equal(t, 1, code)
	n := 0
	for _, r := range reports {
		if r["verdict"] == "diverged" {
			n++
			assert.Equal(t, prefix+"7", r["thread"])
		}
	}
	assert.Equal(t, 1, n)
	assert.Len(t, bill.Refunds(), 20)
}

// 'tulip fork' on the workers of a task queue: the served calls and the
// held one in words, the interrupt and how to resume it; 'tulip inspect'
// and 'tulip explain' name the fork's origin.
func TestCLIFork(t *testing.T) {
	w := newForkWorld(t)
	thread := fmt.Sprintf("fork-cli-%d", time.Now().UnixNano())
	w.record(t, thread)
	forked := thread + "~cli"
	stdout, stderr, code := runCLI(t, "fork", thread, "--at", "1", "--to", forked, "--address", server.Address(),
		"--task-queue", w.tq, "--model", "changed")
	require.Equal(t, 0, code, stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "cached (origin, record 0)")
	assert.Contains(t, stdout, "cached (origin, record 1)")
	assert.Contains(t, stdout, "2 calls served from the origin, 1 new held, 0 ran")
	assert.Contains(t, stderr, "by hook tulip.fork")
	assert.Contains(t, stderr, "tulip resume '"+forked+"'")
	assert.Len(t, w.bill.Refunds(), 1)

	stdout, stderr, code = runCLI(t, "inspect", forked, "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "a fork of thread "+thread+" at response 1")
	assert.Contains(t, stdout, "cached (origin)")
	stdout, stderr, code = runCLI(t, "explain", forked, "c2", "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "served from the log of thread "+thread+" (records equal to it from response 1 on: [1])")

	// Refused in one line: no such response, a model but no worker.
	_, stderr, code = runCLI(t, "fork", thread, "--at", "7", "--address", server.Address(), "--task-queue", w.tq, "--model", "changed")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "it has 3 model responses: fork at 1 to 3, not 7")
	_, stderr, code = runCLI(t, "fork", thread, "--address", server.Address(), "--model", "changed")
	assert.Equal(t, 2, code, stderr)
	require.NoError(t, dial(t, server.Address()).TerminateWorkflow(ctxT(t), forked, "", "test done"))
}

// The recorded fork (served from its origin, a new call held and
// declined) replays under the current code.
func TestReplayForkHistory(t *testing.T) {
	require.NoError(t, tulip.ReplayHistories(forkOptions(demo.NewToolbox()), tulip.ReplayOptions{}, forkHistory))
}

// perUserModel answers each user message with a page_oncall call, and
// anything else (a tool's result) with text: a model asked a question
// answers it.
func perUserModel() tulip.Model {
	return tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "user" {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("p%d", req.Turn), Name: "page_oncall",
				Arguments: `{"case_id":"k-1","summary":"` + last.Content + `"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "paged"}, nil
	})
}

// Eval's decline answers the held call only (issue 55, item 2): it adds
// no user turn that nobody sent, so a model that answers each user
// message is not asked again. Before, eval's decline became a user
// message, the model called again, and the fork looped until eval gave
// up: "failed", where the answer is "diverged at response 1".
func TestEvalDeclineAnswersTheCallOnly(t *testing.T) {
	_, tb := billedToolbox(t)
	tq := taskQueue("evaldecline")
	c := dial(t, server.Address())
	startPublicWorker(t, c, tq, tulip.Options{Tools: toolsets(tb.Tools()...),
		Models: map[string]tulip.Model{"v1": evalModel(""), "peruser": perUserModel()}})
	thread := fmt.Sprintf("evaldecline-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "v1", ThreadID: thread, Message: "refund ord-3"})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status)

	reports, code, stderr := evalJSON(t, "--address", server.Address(), "--task-queue", tq, "--model", "peruser", thread)
	assert.Equal(t, 1, code, stderr)
	require.Len(t, reports, 1)
	assert.Equal(t, "diverged", reports[0]["verdict"], "%v", reports[0])
	assert.EqualValues(t, 1, reports[0]["diverged_at"])
	assert.EqualValues(t, 1, reports[0]["held"], "one held call, declined once")
	assert.Zero(t, tb.Invocations()["page_oncall"], "the declined page never ran")
}

// A fork serves what the origin ran after an approval. The origin's refund
// was held by a hook (approve_refund), approved, and ran outside the log
// (a performed held call is never recorded, docs/rules.md); the thread's
// state keeps it for forks. A fork with the origin's model and hook
// serves it from there: the hook does not ask again (the origin asked),
// the fork does not hold it as "never made", and billing is reached no
// more. A fork with the hook off serves it too. Before the fix the first
// fork was held by the hook, the second by tulip.fork as a call "never
// made", and approving either refunded a second time.
func TestForkServesWhatAnApprovalRan(t *testing.T) {
	bill, tb := billedToolbox(t)
	opts := forkOptions(tb)
	opts.Hooks = map[string]tulip.Hook{"approve_refund": tulip.Approve("issue_refund", "refunds need a person")}
	tq := taskQueue("forkapproved")
	c := dial(t, server.Address())
	startPublicWorker(t, c, tq, opts)
	thread := fmt.Sprintf("fork-approved-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "origin", ThreadID: thread, Message: "refund ord-1",
		Hooks: []string{"approve_refund"}})
	require.NoError(t, err)
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Interrupted, res.Status, res.Error)
	require.Equal(t, "approve_refund", res.Interrupt.Hook)
	_, err = run.Resume(ctxT(t), agent.Approve(res.Interrupt.ID))
	require.NoError(t, err)
	res, err = run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	require.Len(t, bill.Refunds(), 1, "the origin's approved refund")

	for _, hooks := range [][]string{{"approve_refund"}, nil} {
		forked := fmt.Sprintf("%s~%d", thread, len(hooks))
		frun, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "same", ThreadID: forked,
			ForkOf: thread, ForkAt: 1, Hooks: hooks})
		require.NoError(t, err)
		fres, err := frun.Await(ctxT(t))
		require.NoError(t, err)
		if fres.Status == agent.Interrupted {
			// What a person would be asked: approving runs the refund again.
			_, err = frun.Resume(ctxT(t), agent.Approve(fres.Interrupt.ID))
			require.NoError(t, err)
			_, err = frun.Await(ctxT(t))
			require.NoError(t, err)
			t.Errorf("hooks %v: the fork asked about a call its origin made (hook %s: %s)", hooks, fres.Interrupt.Hook, fres.Interrupt.Reason)
		}
		assert.Equal(t, []string{"lookup_order cached origin", "issue_refund cached origin"}, forkOutcomes(fres.Trace), "hooks %v", hooks)
		assert.Len(t, bill.Refunds(), 1, "hooks %v: billing holds the origin's refund alone", hooks)
	}
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
}
