package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// requests keeps what a model was asked, for the test to read.
type requests struct {
	mu  sync.Mutex
	all []activities.ModelRequest
}

func (q *requests) add(req activities.ModelRequest) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.all = append(q.all, req)
}

func (q *requests) list() []activities.ModelRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]activities.ModelRequest(nil), q.all...)
}

// toolMessage is the tool message answering call id in msgs, or nil.
func toolMessageOf(msgs []threadstate.Message, id string) *threadstate.Message {
	for i := range msgs {
		if msgs[i].Role == "tool" && msgs[i].ToolCallID == id {
			return &msgs[i]
		}
	}
	return nil
}

// lastUser is the content of the last user message.
func lastUser(msgs []threadstate.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// lookupTool is a worker tool: idempotent, it counts its runs.
func lookupTool(runs *int, mu *sync.Mutex) *activities.Tool {
	return activities.MustTool(protocol.ToolSpec{Name: "lookup_order", Idempotent: true},
		func(ctx context.Context, a struct {
			OrderID string `json:"order_id"`
		}) (map[string]string, error) {
			mu.Lock()
			*runs++
			mu.Unlock()
			return map[string]string{"order_id": a.OrderID, "status": "shipped"}, nil
		})
}

var weatherSpec = protocol.ToolSpec{Name: "get_weather", Description: "The weather in a city.", Idempotent: true,
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}

var notifySpec = protocol.ToolSpec{Name: "notify", Description: "Tell the user's phone."}

func callOutcomes(trace []agentrun.TraceLine) []string {
	var out []string
	for _, l := range trace {
		out = append(out, l.CallID+":"+string(l.Outcome))
	}
	return out
}

// A client tool's call is held for the caller (an interrupt of
// client_tools) while the worker's call of the same response runs; a
// resume without a result for each held call, with an unknown call id, or
// an approval is refused; the results are recorded and given to the model;
// an identical later call of the idempotent client tool is served from
// the log, in the run and in the thread's next run, with no interrupt; a
// result by signal is taken too; and the run replays.
func TestClientToolsHeldAnsweredAndServed(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	var mu sync.Mutex
	runs := 0
	var asked requests
	model := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		asked.add(req)
		call := func(id, tool, args string) threadstate.ToolCall {
			return threadstate.ToolCall{ID: id, Name: tool, Arguments: args}
		}
		if lastUser(req.Messages) == "again" {
			if req.Turn == 1 {
				return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{call("c5", "get_weather", `{"city": "Paris"}`)}}, nil
			}
			return activities.ModelResponse{Text: "still sunny"}, nil
		}
		switch req.Turn {
		case 1:
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{call("c1", "lookup_order", `{"order_id": "ord-1"}`),
				call("c2", "get_weather", `{"city":"Paris"}`)}}, nil
		case 2:
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{call("c3", "get_weather", `{"city": "Paris"}`),
				call("c4", "notify", `{"text": "sunny"}`), call("c6", "notify", `{"text": "again"}`)}}, nil
		}
		return activities.ModelResponse{Text: "done"}, nil
	})
	opts := workerplugin.Options{Tools: []*activities.Tool{lookupTool(&runs, &mu)}, Models: map[string]activities.Model{"m": model}}
	startWorker(t, c, tq, opts)
	thread := threadID(t)
	ro := runclient.RunOptions{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "weather?",
		ClientTools: []protocol.ToolSpec{weatherSpec, notifySpec}}
	h, res, err := runclient.Run(ctxT(t), c, ro)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	require.NotNil(t, res.Interrupt)
	it := res.Interrupt
	assert.Equal(t, agentrun.ClientToolsHook, it.Hook)
	assert.Equal(t, agentrun.ClientToolsReason, it.Reason)
	assert.Equal(t, []threadstate.ToolCall{{ID: "c2", Name: "get_weather", Arguments: `{"city":"Paris"}`}}, it.Held, "as the model emitted it")
	assert.Equal(t, []string{"c1:executed", "c2:held"}, callOutcomes(res.Trace), "the worker's call of the response ran")
	first := asked.list()[0]
	var names []string
	for _, s := range first.Tools {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"lookup_order", "get_weather", "notify"}, names, "the client tools are offered after the worker's")

	// Refused: no results, an unknown call id, an approval.
	for name, in := range map[string]agentrun.ResumeInput{
		"no results":   {InterruptID: it.ID},
		"unknown id":   {InterruptID: it.ID, Results: []agentrun.ToolResult{{CallID: "c2", Output: "{}"}, {CallID: "c9", Output: "{}"}}},
		"approval":     {InterruptID: it.ID, Answer: "approved", PerformDangling: true},
		"missing call": {InterruptID: it.ID, Results: []agentrun.ToolResult{}},
	} {
		_, err := runclient.Resume(ctxT(t), c, h.WorkflowID, in)
		require.Error(t, err, name)
		assert.True(t, tulip.Is(err, tulip.BadInput), "%s: %v", name, err)
		assert.Contains(t, err.Error(), it.ID, name)
	}
	_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: it.ID,
		Results: []agentrun.ToolResult{{CallID: "c9", Output: "{}"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"c9"`)

	_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: it.ID,
		Results: []agentrun.ToolResult{{CallID: "c2", Output: `{ "temp_c": 21 }`}}})
	require.NoError(t, err)
	res, err = runclient.Await(ctxT(t), c, h, it.ID)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status, "the non-idempotent client call is held")
	it2 := res.Interrupt
	assert.Equal(t, agentrun.ClientToolsHook, it2.Hook)
	require.Len(t, it2.Held, 2)
	assert.Equal(t, "c4", it2.Held[0].ID)
	assert.Equal(t, "c6", it2.Held[1].ID)
	second := asked.list()[1]
	msg := toolMessageOf(second.Messages, "c2")
	require.NotNil(t, msg, "the model reads the client's result")
	assert.Equal(t, `{"temp_c":21}`, msg.Content)
	assert.False(t, msg.Served)

	// By signal: the results of both held calls, one an error.
	require.NoError(t, runclient.ResumeBySignal(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: it2.ID,
		Results: []agentrun.ToolResult{{CallID: "c6", Output: "phone is off", IsError: true}, {CallID: "c4", Output: "sent"}}}))
	res, err = runclient.Await(ctxT(t), c, h, it2.ID)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, "done", res.Answer)
	assert.Equal(t, []string{"c1:executed", "c2:held", "c2:executed", "c3:cached", "c4:held", "c6:held", "c4:executed", "c6:executed"},
		callOutcomes(res.Trace))
	last := lastLines(res.Trace)
	assert.JSONEq(t, `{"temp_c":21}`, string(last["c3"].Result), "served the client's result")
	assert.JSONEq(t, `"sent"`, string(last["c4"].Result), "text that is not JSON is a JSON string")
	require.NotNil(t, last["c6"].Error)
	assert.Equal(t, "phone is off", *last["c6"].Error)
	third := asked.list()[2]
	assert.Equal(t, `"sent"`, toolMessageOf(third.Messages, "c4").Content)
	assert.Equal(t, `{"error":"phone is off"}`, toolMessageOf(third.Messages, "c6").Content)
	assert.True(t, toolMessageOf(third.Messages, "c3").Served)

	recs, err := runclient.Log(ctxT(t), c, h)
	require.NoError(t, err)
	var origins []string
	for _, r := range recs {
		origins = append(origins, r.CallID+":"+string(r.Origin))
	}
	assert.Equal(t, []string{"c1:executed", "c2:executed", "c3:cached", "c4:executed", "c6:executed"}, origins)
	require.NotNil(t, recs[4].Error)
	assert.Equal(t, protocol.ErrClientTool, recs[4].Error.Type)

	path := filepath.Join(t.TempDir(), "client-tools.json")
	writeHistory(t, c, h, path)
	assert.NoError(t, workerplugin.ReplayHistories(workerplugin.Options{Tools: opts.Tools}, workerplugin.ReplayOptions{}, path))

	// The thread's next run: the identical call is served from the first
	// run's record, with no interrupt.
	ro.Message = "again"
	h2, res, err := runclient.Run(ctxT(t), c, ro)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, []string{"c5:cached"}, callOutcomes(res.Trace))
	assert.JSONEq(t, `{"temp_c":21}`, string(res.Trace[0].Result))
	require.NotNil(t, res.Trace[0].ServedFrom)
	assert.Equal(t, 1, *res.Trace[0].ServedFrom)
	assert.NotEqual(t, h.RunID, h2.RunID)
	mu.Lock()
	assert.Equal(t, 1, runs, "the worker's tool ran once")
	mu.Unlock()
}

// A client tool named as a worker tool fails the run at its start
// (tulip.BadInput), naming it.
func TestClientToolNameClash(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	var mu sync.Mutex
	runs := 0
	model := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		return activities.ModelResponse{Text: "never"}, nil
	})
	startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{lookupTool(&runs, &mu)}, Models: map[string]activities.Model{"m": model}})
	for _, tools := range [][]protocol.ToolSpec{
		{{Name: "lookup_order"}},
		{weatherSpec, weatherSpec},
		{{Name: "bad name"}},
	} {
		_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "hi", ClientTools: tools})
		require.Error(t, err)
		assert.True(t, tulip.Is(err, tulip.BadInput), "%v", err)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", tools[len(tools)-1].Name))
		if res != nil {
			assert.Equal(t, agentrun.StatusFailed, res.Status)
		}
	}
}

// The run's instructions and params reach every model request, across
// continue-as-new; the usage of its three responses is summed in its
// result, the same when the closed run is replayed (a query replays it)
// and when its histories replay.
func TestInstructionsParamsAndUsage(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	var mu sync.Mutex
	runs := 0
	var asked requests
	model := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		asked.add(req)
		u := &threadstate.Usage{PromptTokens: 100 * req.Turn, CompletionTokens: req.Turn, CachedTokens: 10}
		if req.Turn < 3 {
			return activities.ModelResponse{Usage: u, ToolCalls: []threadstate.ToolCall{{ID: fmt.Sprintf("c%d", req.Turn), Name: "lookup_order",
				Arguments: fmt.Sprintf(`{"order_id": "ord-%d"}`, req.Turn)}}}, nil
		}
		return activities.ModelResponse{Usage: u, Text: "done"}, nil
	})
	opts := workerplugin.Options{Tools: []*activities.Tool{lookupTool(&runs, &mu)}, Models: map[string]activities.Model{"m": model}}
	startWorker(t, c, tq, opts)
	temp, maxOut := 0.25, 64
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "hi", ThreadID: threadID(t),
		Instructions: "Be brief.", Params: &protocol.ModelParams{Temperature: &temp, MaxOutputTokens: &maxOut}, ContinueAfterTurns: 1})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, 2, res.ContinuedAsNew)
	want := &threadstate.Usage{PromptTokens: 600, CompletionTokens: 6, CachedTokens: 30}
	assert.Equal(t, want, res.Usage)
	reqs := asked.list()
	require.Len(t, reqs, 3)
	for _, req := range reqs {
		assert.Equal(t, "Be brief.", req.Instructions, "turn %d", req.Turn)
		require.NotNil(t, req.Params)
		assert.Equal(t, 0.25, *req.Params.Temperature)
		assert.Equal(t, 64, *req.Params.MaxOutputTokens)
		assert.Nil(t, req.Params.TopP)
	}

	state, err := runclient.State(ctxT(t), c, h)
	require.NoError(t, err)
	assert.Equal(t, want, state.Usage, "replayed from history, the same sum")

	// Every run of the chain replays.
	dir := t.TempDir()
	runID := h.RunID
	for i := 0; runID != ""; i++ {
		path := filepath.Join(dir, fmt.Sprintf("run-%d.json", i))
		writeHistory(t, c, runclient.Handle{WorkflowID: h.WorkflowID, RunID: runID}, path)
		assert.NoError(t, workerplugin.ReplayHistories(workerplugin.Options{Tools: opts.Tools}, workerplugin.ReplayOptions{}, path))
		runID = nextRun(t, c, h.WorkflowID, runID)
	}

	// A run whose model reports no usage has none.
	startWorker(t, c, tq+"-plain", workerplugin.Options{Models: map[string]activities.Model{"m": activities.ModelFunc(
		func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
			return activities.ModelResponse{Text: "ok"}, nil
		})}})
	_, res, err = runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq + "-plain", Model: "m", Message: "hi"})
	require.NoError(t, err)
	assert.Nil(t, res.Usage)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(b), `"usage"`))
}

// nextRun is the run a run continued as new into, or "".
func nextRun(t *testing.T, c client.Client, workflowID, runID string) string {
	hist := history(t, c, workflowID, runID)
	last := hist.Events[len(hist.Events)-1]
	if last.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
		return ""
	}
	return last.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
}
