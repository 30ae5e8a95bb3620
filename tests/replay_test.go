package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/threadstore"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

const historiesDir = "testdata/histories"

// TestReplayHistories replays every recorded history with the plugin
// installed (and the sticky cache off, see TestMain): workflow and
// interceptor changes must keep them replaying. testdata/histories holds
// what the current code records (TestRecordHistories); the frozen
// directories hold what earlier code recorded, which must replay forever
// (behind workflow.GetVersion) and are never re-recorded: v1/ before
// threads carried their conversation, v2/ before state went by reference
// (and before runs streamed), v3/ before performed held calls went through
// the hooks ("tulip-held-args"), v4/ before the live stream read its
// signals on demand, v5/ before a run's gates became one
// ("tulip-baseline").
func TestReplayHistories(t *testing.T) {
	current, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(current), 8, "recorded histories are checked in")
	files := current
	for dir, n := range map[string]int{"v1": 9, "v2": 13, "v3": 1, "v4": 16, "v5": 16} {
		frozen, err := filepath.Glob(filepath.Join(historiesDir, dir, "*.json"))
		require.NoError(t, err)
		require.Len(t, frozen, n, "the frozen %s histories are checked in", dir)
		files = append(files, frozen...)
	}
	// As the CLI's workers replay them too: with a thread store (tulip dev
	// --db), whose old-format runs decide their checkpoint load as they did
	// without one.
	withStore := cli.ReplayOptions()
	withStore.Checkpointer = threadstate.TemporalCheckpointer{Store: threadstore.DirStore{Dir: t.TempDir()}}
	for _, f := range files {
		name, _ := filepath.Rel(historiesDir, f)
		t.Run(name, func(t *testing.T) {
			assert.NoError(t, workerplugin.ReplayHistories(cli.ReplayOptions(), workerplugin.ReplayOptions{}, f))
			assert.NoError(t, workerplugin.ReplayHistories(withStore, workerplugin.ReplayOptions{}, f), "with a thread store")
		})
	}
}

// TestReplayBadHistory: a history recorded by a worker without the dedup
// interceptor (its duplicate call executed) is nondeterministic under the
// plugin, which serves that call and so issues one command fewer. The
// replayer must say so; `tulip replay` must exit 1 naming the file.
func TestReplayBadHistory(t *testing.T) {
	bad := filepath.Join(historiesDir, "bad", "duplicate-executed-without-plugin.json")
	err := workerplugin.ReplayHistories(cli.ReplayOptions(), workerplugin.ReplayOptions{}, bad)
	var re *workerplugin.ReplayError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, bad, re.File)
	// The SDK exports no type for this failure; TMPRL1100 is its documented
	// code for nondeterminism. tulip says which tool call differs, and why
	// it probably does.
	assert.Contains(t, re.Err.Error(), "TMPRL1100")
	explained := bad + ": replay failed: event 30 schedules tulip.tool.issue_refund (call c2), but this worker's code served the call from the log (record 0): " +
		"was issue_refund idempotent when the history was recorded? (likely: its Idempotent flag changed, or a hook now rewrites its arguments)"
	assert.Equal(t, explained, err.Error())

	// The public API's error is its own type, with the same line.
	ro := cli.ReplayOptions()
	opts := tulip.Options{Hooks: publicHooks(ro.Hooks), Tools: toolsets(ro.Tools...)}
	err = tulip.ReplayHistories(opts, tulip.ReplayOptions{}, bad)
	var pub *tulip.ReplayError
	require.ErrorAs(t, err, &pub)
	assert.Equal(t, bad, pub.File)
	assert.Equal(t, explained, err.Error())
	assert.Contains(t, pub.Explained, "event 30 schedules tulip.tool.issue_refund")
	t.Log(err)

	// The same history replays without the interceptor: the failure is the
	// plugin's different decision, not a damaged file.
	plain, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{})
	require.NoError(t, err)
	require.NoError(t, workerplugin.Register(plain, cli.ReplayOptions()))
	assert.NoError(t, plain.ReplayWorkflowHistoryFromJSONFile(quietLogger(), bad))

	good, _ := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	t.Setenv("TULIP_LOG_LEVEL", "")
	stdout, stderr, code := runCLI(t, append([]string{"replay", bad}, good[0])...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "ok   "+good[0])
	// Two lines: the file with the event that differed, and where to go
	// for your own workflows. No stack trace.
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Len(t, lines, 2, stderr)
	assert.Equal(t, "tulip: "+explained, lines[0])
	assert.Contains(t, lines[1], "tulip.ReplayHistories")
}

func writeHistory(t *testing.T, c client.Client, h runclient.Handle, path string) {
	t.Helper()
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(history(t, c, h.WorkflowID, h.RunID))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	t.Logf("wrote %s", path)
}

// TestRecordHistories re-records the checked-in histories from real runs on
// the embedded server. It is skipped unless TULIP_RECORD_HISTORIES=1:
//
//	TULIP_RECORD_HISTORIES=1 go test ./tests -run TestRecordHistories
func TestRecordHistories(t *testing.T) {
	if os.Getenv("TULIP_RECORD_HISTORIES") != "1" {
		t.Skip("set TULIP_RECORD_HISTORIES=1 to re-record tests/testdata/histories")
	}
	c := dial(t, server.Address())
	hooks := demo.Hooks()
	parse := func(text string) *scenario.Scenario {
		sc, err := scenario.Parse([]byte(text), func(h string) bool { _, ok := hooks[h]; return ok })
		require.NoError(t, err)
		return sc
	}
	play := func(name string, sc *scenario.Scenario) {
		tq := taskQueue("record")
		startWorker(t, c, tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: hooks, Models: sc.Models(tq)})
		var handles []runclient.Handle
		r := &scenario.Runner{Client: c, TaskQueue: tq, Prefix: tq, OnLine: func(scenario.Line) {}}
		runs, err := r.Run(ctxT(t), sc)
		require.NoError(t, err)
		for _, run := range runs {
			handles = append(handles, runclient.Handle{WorkflowID: run.WorkflowID})
		}
		for i, h := range handles {
			// Runs on one thread share a workflow ID: take each run's ID
			// from the thread's runs in order.
			h.RunID = runIDs(t, c, h.WorkflowID)[countBefore(handles, i)]
			suffix := ""
			if len(handles) > 1 {
				suffix = "-run" + string(rune('1'+i))
			}
			writeHistory(t, c, h, filepath.Join(historiesDir, name+suffix+".json"))
		}
	}
	play("refund-story", demo.RefundStory())
	recordChain(t, c)
	recordAfterTerminated(t, c)
	play("interrupt-resume-dangling", parse(`{"runs": [{"hooks": ["approve_isolate_host"], "turns": [
		{"tool_calls": [{"id": "c1", "name": "issue_refund", "arguments": "{\"order_id\": \"ord-1\", \"amount\": 5}"}]},
		{"tool_calls": [{"id": "c2", "name": "isolate_host", "arguments": "{\"host\": \"web-1\"}"},
		                {"id": "c3", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"}]}],
		"resumes": [{"answer": "approved", "perform_dangling": true, "turns": [
			{"tool_calls": [{"id": "c4", "name": "issue_refund", "arguments": "{\"order_id\": \"ord-1\", \"amount\": 5}"}]},
			{"text": "done"}]}]}]}`))
	// Held calls performed after hooks: what the resume runs changed behind
	// "tulip-held-args" (v3/held-args.json is this run recorded before).
	play("held-args", parse(heldArgsScenario))
	// A thread run after one whose mints were held and performed (no
	// record holds them): its keys count on past them ("tulip-key-counter").
	play("keys-after-dangling", parse(keysAfterDanglingScenario))
	// Three executing calls in one response, run at once: replaying it one
	// call at a time (the parallel-calls gate ignored) is nondeterministic.
	play("parallel-calls", parse(`{"runs": [{"turns": [
		{"tool_calls": [{"id": "c1", "name": "issue_refund", "arguments": "{\"order_id\": \"ord-1\", \"amount\": 5}"},
		                {"id": "c2", "name": "lookup_order", "arguments": "{\"order_id\": \"ord-1\"}"},
		                {"id": "c3", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"}]},
		{"text": "done"}]}]}`))
	play("reject-cancel-error", parse(`{"runs": [{"hooks": ["block_page_oncall", "upper_order_id"], "turns": [
		{"tool_calls": [{"id": "c1", "name": "drop_database", "arguments": "{}"},
		                {"id": "c2", "name": "issue_refund", "arguments": "{\"order_id\": "},
		                {"id": "c3", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"}]},
		{"tool_calls": [{"id": "c4", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"},
		                {"id": "c5", "name": "charge_card", "arguments": "{\"card\": \"4242\", \"amount\": 10}"}]},
		{"remove_hooks": ["block_page_oncall"], "tool_calls": [
		                {"id": "c6", "name": "charge_card", "arguments": "{\"amount\": 10.0, \"card\": \"4242\"}"},
		                {"id": "c7", "name": "issue_refund", "arguments": "{\"order_id\": \"ord-9\", \"amount\": 1}"},
		                {"id": "c8", "name": "issue_refund", "arguments": "{\"order_id\": \"ORD-9\", \"amount\": 1}"}]}]}]}`))

	// Max turns: a model that never stops.
	tq := taskQueue("record")
	forever := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "m", Name: "mint_case_id", Arguments: "{}"}}}, nil
	})
	startWorker(t, c, tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: hooks, Models: map[string]activities.Model{"m": forever}})
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", MaxTurns: 3})
	require.NoError(t, err)
	_, err = runclient.Await(ctxT(t), c, h, "")
	require.Error(t, err)
	writeHistory(t, c, h, filepath.Join(historiesDir, "max-turns-failure.json"))

	// The bad history: the same duplicate, executed by a worker that has no
	// dedup interceptor. Kept as recorded: since "tulip-plugin-required" a
	// run on such a worker fails at its start (tulip.PluginMissing), so it
	// can no longer be recorded; it replays as it ran.
	if _, err := os.Stat(filepath.Join(historiesDir, "bad", "duplicate-executed-without-plugin.json")); err == nil {
		return
	}
	tq = taskQueue("record")
	dup := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund)), turn(call("c2", "issue_refund", refund))}}
	w := sdkworker.New(c, tq, sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{}})
	require.NoError(t, workerplugin.Register(w, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: hooks, Models: map[string]activities.Model{"m": dup.Model()}}))
	require.NoError(t, w.Start())
	defer w.Stop()
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m"})
	require.NoError(t, err)
	require.Equal(t, agentrun.OutcomeExecuted, res.Trace[1].Outcome, "without the interceptor the duplicate executes")
	writeHistory(t, c, h, filepath.Join(historiesDir, "bad", "duplicate-executed-without-plugin.json"))
}

// heldArgsScenario holds a response at isolate_host (approve_isolate_host)
// with a refund whose order id upper_order_id rewrites and a page that
// block_page_oncall cancels after it: before "tulip-held-args" the resume
// performed both with the model's arguments, past the hooks; since, they go
// through the hooks (the refund runs upper-cased, the page is cancelled:
// one activity fewer), so each recording replays only behind the gate.
const heldArgsScenario = `{"runs": [{"hooks": ["upper_order_id", "approve_isolate_host", "block_page_oncall"], "turns": [
	{"tool_calls": [{"id": "c1", "name": "isolate_host", "arguments": "{\"host\": \"web-1\"}"},
	                {"id": "c2", "name": "issue_refund", "arguments": "{\"order_id\": \"ord-1\", \"amount\": 5}"},
	                {"id": "c3", "name": "page_oncall", "arguments": "{\"case_id\": \"k\", \"summary\": \"s\"}"}]}],
	"resumes": [{"answer": "approved", "perform_dangling": true, "turns": [{"text": "done"}]}]}]}`

// keysAfterDanglingScenario: the first run's two mints are held behind
// isolate_host and performed (counted, never recorded); the second run on
// the thread loads a state whose minted count is past its log's length.
const keysAfterDanglingScenario = `{"runs": [
	{"thread_id": "keys-thread", "hooks": ["approve_isolate_host"], "turns": [
		{"tool_calls": [{"id": "c1", "name": "isolate_host", "arguments": "{\"host\": \"web-1\"}"},
		                {"id": "c2", "name": "mint_case_id", "arguments": "{}"},
		                {"id": "c3", "name": "mint_case_id", "arguments": "{}"}]}],
		"resumes": [{"answer": "approved", "perform_dangling": true, "turns": [{"text": "done"}]}]},
	{"thread_id": "keys-thread", "turns": [
		{"tool_calls": [{"id": "c4", "name": "mint_case_id", "arguments": "{}"}]},
		{"tool_calls": [{"id": "c5", "name": "mint_case_id", "arguments": "{}"}]},
		{"text": "done"}]}]}`

// recordChain records every run of a run that continues as new (every 2
// turns) across an interrupt and its resume.
func recordChain(t *testing.T, c client.Client) {
	tb := demo.NewToolbox()
	tq := taskQueue("record")
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"m": chainScript().Model()}})
	thread := tq + "-chain"
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "go",
		Hooks: []string{"approve_isolate_host"}, ContinueAfterTurns: 2})
	require.NoError(t, err)
	res, err := runclient.Await(ctxT(t), c, h, "")
	require.NoError(t, err)
	_, err = runclient.Resume(ctxT(t), c, thread, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
	require.NoError(t, err)
	res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.ContinuedAsNew, 3)
	for i, id := range chainRunIDs(t, c, thread) {
		writeHistory(t, c, runclient.Handle{WorkflowID: thread, RunID: id}, filepath.Join(historiesDir, fmt.Sprintf("continue-as-new-%d.json", i+1)))
	}
}

// recordAfterTerminated records a thread run that reloads the records of a
// run terminated mid-way (read back by query from its history).
func recordAfterTerminated(t *testing.T, c client.Client) {
	tb := demo.NewToolbox()
	first := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "issue_refund", refund))}}
	second := scenario.Run{Turns: []scenario.Turn{turn(call("c2", "issue_refund", refund))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"first": blockingModel(t, first), "second": second.Model()})
	thread := tq + "-terminated"
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "first", ThreadID: thread, Message: "refund"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := runclient.State(ctxT(t), c, h)
		return err == nil && len(st.Trace) == 1
	}, time.Minute, 50*time.Millisecond)
	require.NoError(t, c.TerminateWorkflow(ctxT(t), h.WorkflowID, h.RunID, "stopped"))
	h2, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "second", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	require.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome)
	writeHistory(t, c, h, filepath.Join(historiesDir, "terminated-mid-run.json"))
	writeHistory(t, c, h2, filepath.Join(historiesDir, "thread-after-terminated.json"))
}

// chainRunIDs lists the runs of a workflow ID's newest continue-as-new
// chain, oldest first.
func chainRunIDs(t *testing.T, c client.Client, workflowID string) []string {
	desc, err := c.DescribeWorkflowExecution(ctxT(t), workflowID, "")
	require.NoError(t, err)
	var ids []string
	for id := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); id != ""; {
		ids = append([]string{id}, ids...)
		h := history(t, c, workflowID, id)
		id = h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	return ids
}

func countBefore(hs []runclient.Handle, i int) int {
	n := 0
	for j := 0; j < i; j++ {
		if hs[j].WorkflowID == hs[i].WorkflowID {
			n++
		}
	}
	return n
}

// runIDs lists a workflow ID's runs, oldest first, by following each run's
// previous run recorded in its input.
func runIDs(t *testing.T, c client.Client, workflowID string) []string {
	desc, err := c.DescribeWorkflowExecution(ctxT(t), workflowID, "")
	require.NoError(t, err)
	ids := []string{desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()}
	for {
		prev, err := threadstate.PreviousRunOf(ctxT(t), c, nil, workflowID, ids[0])
		require.NoError(t, err)
		if prev == "" {
			return ids
		}
		ids = append([]string{prev}, ids...)
	}
}

var _ = strings.TrimSpace

// A replay failure names the tool call and the likely cause, the other way
// round too: a history recorded with a tool that was not idempotent (its
// repeat ran) replays on a worker where it is; one recorded with it
// idempotent (its repeat served) replays on a worker where it is not.
func TestReplayNamesTheTool(t *testing.T) {
	c := dial(t, server.Address())
	run := scenario.Run{Turns: []scenario.Turn{turn(call("t1", "create_ticket", `{"title": "x"}`)), turn(call("t2", "create_ticket", `{"title": "x"}`))}}
	ticket := func(idempotent bool) *activities.Tool {
		return activities.MustTool(protocol.ToolSpec{Name: "create_ticket", Idempotent: idempotent},
			func(context.Context, map[string]any) (map[string]string, error) {
				return map[string]string{"id": "T-1"}, nil
			})
	}
	record := func(idempotent bool) string {
		tq := taskQueue(t.Name())
		startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{ticket(idempotent)}, Models: map[string]activities.Model{"m": run.Model()}})
		h, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m"})
		require.NoError(t, err)
		f := filepath.Join(t.TempDir(), fmt.Sprintf("idempotent-%v.json", idempotent))
		writeHistory(t, c, h, f)
		return f
	}
	ran, served := record(false), record(true)
	err := workerplugin.ReplayHistories(workerplugin.Options{Tools: []*activities.Tool{ticket(true)}}, workerplugin.ReplayOptions{}, ran)
	require.Error(t, err)
	assert.Regexp(t, `^.*: replay failed: event \d+ schedules tulip.tool.create_ticket \(call t2\), but this worker's code served the call from the log \(record 0\): was create_ticket idempotent`, err.Error())
	err = workerplugin.ReplayHistories(workerplugin.Options{Tools: []*activities.Tool{ticket(false)}}, workerplugin.ReplayOptions{}, served)
	require.Error(t, err)
	assert.Regexp(t, `^.*: replay failed: this worker's code schedules tulip.tool.create_ticket \(call t2\), which the history serves from the log instead: was create_ticket idempotent`, err.Error())
	assert.NoError(t, workerplugin.ReplayHistories(workerplugin.Options{Tools: []*activities.Tool{ticket(true)}}, workerplugin.ReplayOptions{}, served))
}

// The replay gate before a deploy: `tulip history --recent N` fetches the
// latest closed agent runs of a task queue, and tulip.ReplayHistories
// replays them against the new build. A build that turned create_ticket
// non-idempotent fails, naming the tool; the unchanged build passes.
func TestReplayGate(t *testing.T) {
	c := dial(t, server.Address())
	ticket := func(idempotent bool) *activities.Tool {
		return activities.MustTool(protocol.ToolSpec{Name: "create_ticket", Idempotent: idempotent},
			func(context.Context, map[string]any) (map[string]string, error) {
				return map[string]string{"id": "T-1"}, nil
			})
	}
	run := scenario.Run{Turns: []scenario.Turn{turn(call("t1", "create_ticket", `{"title": "x"}`)), turn(call("t2", "create_ticket", `{"title": "x"}`))}}
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{ticket(true)}, Models: map[string]activities.Model{"m": run.Model()}})
	for range 2 {
		_, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m"})
		require.NoError(t, err)
	}
	dir := filepath.Join(t.TempDir(), "recent")
	var files []string
	require.Eventually(t, func() bool { // the runs show in visibility after its lag
		_, stderr, code := runCLI(t, "history", "--recent", "10", "--query", "TaskQueue = '"+tq+"'", "-o", dir, "--address", server.Address())
		require.Equal(t, 0, code, stderr)
		files, _ = filepath.Glob(filepath.Join(dir, "*.json"))
		return len(files) == 2
	}, 30*time.Second, 500*time.Millisecond)

	opts := func(idempotent bool) tulip.Options {
		return tulip.Options{Tools: []tulip.Toolset{activities.InternalToolset(ticket(idempotent)).(tulip.Toolset)}}
	}
	require.NoError(t, tulip.ReplayHistories(opts(true), tulip.ReplayOptions{}, files...), "the unchanged build replays")
	err := tulip.ReplayHistories(opts(false), tulip.ReplayOptions{}, files...)
	require.Error(t, err, "the changed build does not")
	assert.Contains(t, err.Error(), "create_ticket")
	assert.Contains(t, err.Error(), "idempotent")
}
