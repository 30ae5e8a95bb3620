package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// compactedHistory is a recorded run whose model's view was compacted
// (TULIP_RECORD_HISTORIES=1 re-records it): changes to workflow code must
// keep it replaying.
const compactedHistory = "testdata/context/compacted.json"

// contextOptions: the demo toolbox (billing behind issue_refund) and a
// read_notes tool whose result is 2 KB, a model with a budget of 3,000
// tokens that reads notes every turn, refunds ord-1 at turns 3 and 11
// (the same call) and answers after turn 14; asked for a summary, it
// answers with one line. sent keeps the size of every request it saw.
func contextOptions(tb *demo.Toolbox, sent *[]int, mu *sync.Mutex) tulip.Options {
	notes := tulip.MustTool(tulip.ToolSpec{Name: "read_notes", Idempotent: true}, func(_ context.Context, a struct {
		N int `json:"n"`
	}) (string, error) {
		return strings.Repeat(fmt.Sprintf("note %d. ", a.N), 2<<10/8), nil
	})
	model := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		n := len(req.Instructions)
		for _, m := range req.Messages {
			n += len(m.Content) + 8
			for _, c := range m.ToolCalls {
				n += len(c.ID) + len(c.Name) + len(c.Arguments) + 8
			}
		}
		if sent != nil {
			mu.Lock()
			*sent = append(*sent, (n+3)/4)
			mu.Unlock()
		}
		usage := &tulip.Usage{PromptTokens: (n + 3) / 4, CompletionTokens: 10}
		switch {
		case req.Summary:
			return tulip.ModelResponse{Text: fmt.Sprintf("summary at turn %d: notes read, ord-1 refunded 20", req.Turn), Usage: usage}, nil
		case req.Turn == 3 || req.Turn == 11:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("c%d", req.Turn), Name: "issue_refund", Arguments: `{"order_id":"ord-1","amount":20}`}}}, nil
		case req.Turn <= 14:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: fmt.Sprintf("c%d", req.Turn), Name: "read_notes", Arguments: fmt.Sprintf(`{"n":%d}`, req.Turn)}}}, nil
		}
		return tulip.ModelResponse{Text: "done"}, nil
	})
	return tulip.Options{Tools: append(toolsets(tb.Tools()...), notes), Models: map[string]tulip.Model{"m": model},
		ContextTokens: map[string]int{"m": 3000}}
}

// A run whose conversation passes its model's budget (3,000 tokens) is
// compacted: a summary, asked once by an activity, in place of its oldest
// messages. Every request the model saw (the summaries' included) stays
// within the budget, the refund repeated at turn 11 is served from the
// log (billing counts one), and the thread keeps every message. Its
// history replays (TestReplayCompactedHistory).
func TestCompactionWithinARun(t *testing.T) {
	bill, tb := billedToolbox(t)
	var mu sync.Mutex
	var sent []int
	c := dial(t, server.Address())
	tq := taskQueue("context")
	startPublicWorker(t, c, tq, contextOptions(tb, &sent, &mu))
	thread := fmt.Sprintf("context-%d", time.Now().UnixNano())
	run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "read the notes and refund ord-1"})
	require.NoError(t, err)
	var streamed []*agent.Compaction
	watched := make(chan error, 1)
	go func() {
		watched <- run.Watch(ctxT(t), 0, func(ev agent.Event) error {
			if ev.Compaction != nil {
				streamed = append(streamed, ev.Compaction)
			}
			return nil
		})
	}()
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, <-watched)
	require.Equal(t, agent.Completed, res.Status, res.Error)
	require.NotEmpty(t, res.Compactions, "the view was compacted")
	for _, cp := range res.Compactions {
		assert.Equal(t, 3000, cp.Budget)
		assert.Greater(t, cp.Replaced, 0)
	}
	mu.Lock()
	for i, n := range sent {
		assert.LessOrEqual(t, n, 3000, "request %d", i)
	}
	mu.Unlock()
	assert.Len(t, bill.Refunds(), 1, "billing: the repeated refund was served")
	assert.Equal(t, agent.Cached, outcomeOf(res.Trace, "c11"))
	st, err := agent.Thread(ctxT(t), c, thread)
	require.NoError(t, err)
	assert.Len(t, st.Messages, 1+2*14+1, "the thread keeps every message")
	// Where a person sees it: the run's stream, tulip inspect, and the
	// run's current details in the Web UI.
	require.Len(t, streamed, len(res.Compactions), "one stream item per compaction")
	assert.Equal(t, res.Compactions[0].Upto, streamed[0].Upto)
	stdout, stderr, code := runCLI(t, "inspect", thread, "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "the model's view: a summary in place of messages 1-")
	v, err := c.QueryWorkflow(ctxT(t), thread, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	assert.Contains(t, md.GetCurrentDetails(), "The model's view: a summary in place of messages 1-")
	assert.Contains(t, md.GetCurrentDetails(), "this run's summaries:")
	if os.Getenv("TULIP_RECORD_HISTORIES") == "1" {
		writeHistory(t, c, runclient.Handle{WorkflowID: thread}, compactedHistory)
	}
}

// The recorded compacted run replays with the sticky cache off: its
// summaries are activity results, never asked again.
func TestReplayCompactedHistory(t *testing.T) {
	require.NoError(t, tulip.ReplayHistories(contextOptions(demo.NewToolbox(), nil, nil), tulip.ReplayOptions{}, compactedHistory))
}
