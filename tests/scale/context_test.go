package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// budgetModel is an OpenAI-compatible chat endpoint on loopback with a
// context budget: a request over it is refused as OpenAI refuses it (400,
// code context_length_exceeded), and every request's size is kept, the
// witness that the run stays within the budget. Its tokens are the
// request's text bytes / 4 (the messages' content, calls and tool
// schemas), reported as usage.prompt_tokens. It reads a page per turn
// (fetch_page, an 8 KB result), refunds ord-1 at turns 10 and 900 (the
// same call: the second must be served from the log), asks a refund of
// 21 at turn 950 (a near miss of turn 10's), and answers after turns
// turns. A summary request (tulip's summary instructions) is answered
// with a short summary.
type budgetModel struct {
	budget, turns int

	mu        sync.Mutex
	sizes     []int  // every request's tokens, in order
	summary   []bool // whether each was a summary request
	summaries int
	over      int
}

type wireMsg struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (b *budgetModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []wireMsg         `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content) + 8
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments) + 8
		}
	}
	for _, t := range req.Tools {
		n += len(t)
	}
	tokens := (n + 3) / 4
	summary := len(req.Messages) > 0 && req.Messages[0].Role == "system" && strings.HasPrefix(req.Messages[0].Content, activities.SummaryInstructions)
	b.mu.Lock()
	b.sizes, b.summary = append(b.sizes, tokens), append(b.summary, summary)
	if summary {
		b.summaries++
	}
	if tokens > b.budget {
		b.over++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, b.budget, tokens)
		return
	}
	b.mu.Unlock()
	msg := map[string]any{"role": "assistant"}
	switch {
	case summary:
		msg["content"] = fmt.Sprintf("Summary: the user asked for the pages and a refund of ord-1 (20, issued; refund id in the results). %d bytes summarized.", n)
	default:
		last := 0 // the last call's turn, from the view's last assistant message
		for i := len(req.Messages) - 1; i >= 0 && last == 0; i-- {
			for _, c := range req.Messages[i].ToolCalls {
				last, _ = strconv.Atoi(strings.TrimPrefix(c.ID, "call-"))
			}
		}
		next := last + 1
		call := func(name, args string) {
			msg["tool_calls"] = []map[string]any{{"id": fmt.Sprintf("call-%d", next), "type": "function",
				"function": map[string]any{"name": name, "arguments": args}}}
		}
		switch {
		case next > b.turns:
			msg["content"] = "done"
		case next == 10 || next == 900:
			call("issue_refund", `{"order_id":"ord-1","amount":20}`)
		case next == 950:
			call("issue_refund", `{"order_id":"ord-1","amount":21}`)
		default:
			call("fetch_page", fmt.Sprintf(`{"page":%d}`, next))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "budget",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}})
}

// A 1,000-turn thread with 8 KB tool results and a model whose budget is
// 60,000 tokens: unbounded, its last request would be about 2 million.
// The run compacts its model's view as it nears the budget (a summary,
// asked by an activity, in place of the oldest messages) and finishes;
// the model endpoint saw no request over the budget. The refund repeated
// at turn 900, after many compactions, is served from the log (billing
// counts one refund of 20), and turn 950's refund of 21 names turn 10's
// record as its near miss. The thread keeps every message.
// budgetThread runs a thread of turns turns against a budgetModel of
// budget tokens, the worker knowing the budget when known is set.
func budgetThread(t testing.TB, turns, budget int, known bool) (*budgetModel, *billing.Server, client.Client, runclient.Handle, *agentrun.RunResult, string) {
	bm, bill, c, h, res, thread, err := budgetThreadErr(t, turns, budget, known)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status, res.Error)
	t.Logf("%d turns: %d model requests, %d of them summaries, largest %d tokens (budget %d)",
		turns, len(bm.sizes), bm.summaries, slicesMax(bm.sizes), budget)
	return bm, bill, c, h, res, thread
}

// budgetThreadErr is budgetThread, returning the run's error.
func budgetThreadErr(t testing.TB, turns, budget int, known bool) (*budgetModel, *billing.Server, client.Client, runclient.Handle, *agentrun.RunResult, string, error) {
	var budgets map[string]int
	if known {
		budgets = map[string]int{"budget": budget}
	}
	bm := &budgetModel{budget: budget, turns: turns}
	hs := httptest.NewServer(bm)
	t.Cleanup(hs.Close)
	model, err := openaimodel.New(openaimodel.Options{BaseURL: hs.URL, Model: "budget", APIKeyEnv: "TULIP_TEST_NO_KEY"})
	require.NoError(t, err)
	bill, err := billing.Start()
	require.NoError(t, err)
	t.Cleanup(bill.Close)
	tb := demo.NewToolbox()
	tb.UseBilling(billing.Client{BaseURL: bill.URL()})
	page := activities.MustTool(protocol.ToolSpec{Name: "fetch_page", Idempotent: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"page":{"type":"integer"}}}`)},
		func(_ context.Context, a struct {
			Page int `json:"page"`
		}) (map[string]any, error) {
			return map[string]any{"page": a.Page, "text": strings.Repeat(fmt.Sprintf("page %d line. ", a.Page), 8<<10/16)}, nil
		})
	var tools []*activities.Tool
	for _, tl := range tb.Tools() {
		if tl.Spec().Name == "issue_refund" {
			tools = append(tools, tl)
		}
	}
	tools = append(tools, page)
	c, err := client.Dial(client.Options{HostPort: server.Address(), Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: tools, Models: map[string]activities.Model{"budget": activities.PublicModel(model)},
		ContextTokens: budgets})
	require.NoError(t, err)
	tq := fmt.Sprintf("scale-context-%d", time.Now().UnixNano())
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	thread := fmt.Sprintf("context-%d", time.Now().UnixNano())
	h, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "budget", ThreadID: thread,
		Message: "read every page, and refund ord-1", MaxTurns: turns + 2})
	return bm, bill, c, h, res, thread, err
}

func TestLongThreadStaysWithinItsBudget(t *testing.T) {
	const turns, budget = 1000, 60000
	bm, bill, c, h, res, thread := budgetThread(t, turns, budget, true)
	ctx := context.Background()
	bm.mu.Lock()
	assert.Zero(t, bm.over, "no request over the budget reached the model")
	assert.LessOrEqual(t, slicesMax(bm.sizes), budget)
	assert.Greater(t, bm.summaries, 10, "the view was compacted, many times")
	bm.mu.Unlock()

	refunds := 0
	for _, rf := range bill.Refunds() {
		if rf.Amount.String() == "20" {
			refunds++
		}
	}
	assert.Equal(t, 1, refunds, "billing: one refund of 20, the repeat 890 turns later served")
	trace, err := runclient.Trace(ctx, c, h, res)
	require.NoError(t, err)
	byID := map[string]agentrun.TraceLine{}
	for _, l := range trace {
		byID[l.CallID] = l
	}
	assert.Equal(t, agentrun.OutcomeCached, byID["call-900"].Outcome, "turn 900's refund")
	if nm := byID["call-950"].NearMiss; assert.NotNil(t, nm, "turn 950's refund of 21 ran: its near miss") {
		assert.Contains(t, []string{"call-10", "call-900"}, nm.CallID, "the near miss names an earlier refund's record, compacted out of the model's view")
		assert.Equal(t, dedup.ReasonArguments, nm.Reason)
	}
	st, err := runclient.Thread(ctx, c, thread)
	require.NoError(t, err)
	assert.Equal(t, 1+2*turns+1, len(st.Messages), "the thread keeps every message")
	require.NotNil(t, st.Context)
	assert.Greater(t, st.Context.Upto, 0)
}

func slicesMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// The worker does not know the model's budget: nothing compacts until the
// provider refuses a request as too long (context_length_exceeded, typed
// tulip.ContextTooLong). The run then compacts down to the last response,
// asks again, once, and goes on to its answer, compacting before the
// budget it learned from the refusal (90% of the refused request). The
// refused request is the control of the test above: without a budget, a
// request over it reaches the model.
func TestTooLongCompactsAndAsksAgain(t *testing.T) {
	const turns, budget = 120, 60000
	bm, _, c, _, res, thread := budgetThread(t, turns, budget, false)
	bm.mu.Lock()
	assert.Greater(t, bm.over, 0, "requests over the budget reached the model (the control)")
	bm.mu.Unlock()
	require.NotEmpty(t, res.Compactions)
	assert.True(t, res.Compactions[0].TooLong, "the first compaction followed the refusal: %+v", res.Compactions[0])
	assert.Less(t, res.Compactions[0].Budget, budget, "the budget learned from the refused request")
	for _, c := range res.Compactions[1:] {
		assert.False(t, c.TooLong, "later ones came before the learned budget was reached: %+v", c)
	}
	bm.mu.Lock()
	assert.Equal(t, 1, bm.over, "one request refused, then none")
	bm.mu.Unlock()
	st, err := runclient.Thread(context.Background(), c, thread)
	require.NoError(t, err)
	require.NotNil(t, st.Context)
	assert.Equal(t, 1+2*turns+1, len(st.Messages), "the thread keeps every message")
}

// A model whose budget one response's result alone passes (a page of
// about 1,650 tokens, a budget of 1,500): compacting cannot help, and the
// run fails at once with kind ContextTooLong, one line, rather than a
// model call that fails forever.
func TestTooLongFailsTyped(t *testing.T) {
	start := time.Now()
	bm, _, _, _, _, _, err := budgetThreadErr(t, 5, 1500, true)
	require.Error(t, err)
	assert.Equal(t, tulip.ContextTooLong, tulip.KindOf(err), "%v", err)
	assert.NotContains(t, err.Error(), "\n")
	assert.Less(t, time.Since(start), 2*time.Minute)
	bm.mu.Lock()
	assert.Zero(t, bm.over, "the worker knew the budget: nothing over it was sent")
	bm.mu.Unlock()
	t.Log(err)
}

// BenchmarkContextTokens reports what a model is sent per turn over a
// 300-turn thread with 8 KB tool results, with compaction (a 60,000-token
// budget) and without (no budget, a window nothing passes): the mean
// tokens of turns 51-100 and 251-300, their ratio (flat with compaction,
// about 3x without, growing linearly), and the summary requests' share
// of all tokens sent:
//
//	go test ./tests/scale -run '^$' -bench ContextTokens -benchtime 1x
func BenchmarkContextTokens(b *testing.B) {
	for range b.N {
		for _, with := range []bool{true, false} {
			budget := 60000
			if !with {
				budget = 1 << 30
			}
			bm, _, _, _, _, _ := budgetThread(b, 300, budget, with)
			bm.mu.Lock()
			var turns []int
			all, summaries := 0, 0
			for i, n := range bm.sizes {
				all += n
				if bm.summary[i] {
					summaries += n
				} else {
					turns = append(turns, n)
				}
			}
			bm.mu.Unlock()
			mean := func(xs []int) float64 {
				s := 0
				for _, x := range xs {
					s += x
				}
				return float64(s) / float64(len(xs))
			}
			early, late := mean(turns[50:100]), mean(turns[250:300])
			name := "without"
			if with {
				name = "with"
			}
			b.ReportMetric(early, "tokens/call-t51-100-"+name)
			b.ReportMetric(late, "tokens/call-t251-300-"+name)
			b.ReportMetric(late/early, "late/early-"+name)
			if with {
				b.ReportMetric(float64(summaries)/float64(all), "summary-share")
			}
		}
	}
}
