package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/anthropicmodel"
	"github.com/tulip-temporal/tulip/anthropicmodel/anthropictest"
	"github.com/tulip-temporal/tulip/internal/demo"
)

// The refund story with the Anthropic model, on the embedded server, over
// the public API, its answers streamed (server-sent events): the model
// (a loopback Messages API, scripted) refunds ord-4821, then refunds it
// again "to be sure" (its input's keys in another order); the second call
// is served from the log and billing is asked for one refund. The thread's
// next run, asked whether the refund went through, re-emits it once more:
// served again, still one refund. Each request carries the whole
// conversation (the previous request's messages, then the new ones: one
// user message of tool_result blocks per assistant turn), with cache
// breakpoints on the system prompt, the last tool, the end of the earlier
// turns and the end of the newest one; the key goes in x-api-key and never
// into history.
func TestAnthropicReEmittedRefundIsServed(t *testing.T) {
	const key = "sk-ant-test-secret-4821"
	t.Setenv("TULIP_TEST_ANTHROPIC_KEY", key)
	srv := anthropictest.New(
		anthropictest.ToolUse("toolu_1", "issue_refund", `{"order_id":"ord-4821","amount":120.0}`),
		anthropictest.Message(anthropictest.TextBlock("Refunding once more, to be sure."),
			anthropictest.ToolUseBlock("toolu_2", "issue_refund", `{"amount":120,"order_id":"ord-4821"}`)),
		anthropictest.Text("Refunded ord-4821."),
		anthropictest.ToolUse("toolu_3", "issue_refund", `{"order_id":"ord-4821","amount":120}`),
		anthropictest.Text("Yes: one refund, re_1."),
	)
	defer srv.Close()

	m, err := anthropicmodel.New(anthropicmodel.Options{Model: "claude-test", BaseURL: srv.URL,
		APIKeyEnv: "TULIP_TEST_ANTHROPIC_KEY", SystemPrompt: "You are a support agent."})
	require.NoError(t, err)
	bill, tb := billedToolbox(t)
	plugin, err := tulip.NewPlugin(tulip.Options{Tools: toolsets(tb.Tools()...), Hooks: publicHooks(demo.Hooks()), Models: map[string]tulip.Model{"claude": m}})
	require.NoError(t, err)
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	thread := threadID(t)
	ask := func(msg string) *agent.Result {
		run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "claude", ThreadID: thread,
			Message: msg, Stream: &agent.StreamOptions{Text: true}})
		require.NoError(t, err)
		res, err := run.Await(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, agent.Completed, res.Status, "%+v", res)
		return res
	}

	res := ask("Please refund order ord-4821")
	assert.Equal(t, "Refunded ord-4821.", res.Answer)
	require.Len(t, res.Trace, 2)
	assert.Equal(t, agent.Executed, res.Trace[0].Outcome)
	assert.Equal(t, agent.Cached, res.Trace[1].Outcome, "the re-emitted refund is served from the log")
	assert.Equal(t, 1, refundsAsked(bill), "billing was asked for one refund")

	res = ask("Did the refund go through?")
	assert.Equal(t, "Yes: one refund, re_1.", res.Answer)
	require.Len(t, res.Trace, 1)
	assert.Equal(t, agent.Cached, res.Trace[0].Outcome)
	assert.Equal(t, 1, refundsAsked(bill), "still one refund")

	assert.Empty(t, srv.Violations(), "requests the API would refuse")
	reqs := srv.Requests()
	require.Len(t, reqs, 5)
	prev := []any{}
	for i, r := range reqs {
		assert.Equal(t, key, r.Header.Get("X-Api-Key"), "request %d", i+1)
		assert.NotEmpty(t, r.Header.Get("Anthropic-Version"), "request %d", i+1)
		assert.Equal(t, true, r.Body["stream"], "request %d streams", i+1)
		msgs := r.Body["messages"].([]any)
		// The whole conversation: the previous request's messages first.
		require.Greater(t, len(msgs), len(prev), "request %d", i+1)
		assert.Equal(t, stripCache(prev), stripCache(msgs[:len(prev)]), "request %d starts with the conversation so far", i+1)
		prev = msgs
		// Breakpoints: system, last tool, end of the earlier turns, end of
		// the newest turn.
		assert.Contains(t, mustJSON(r.Body["system"]), `"cache_control"`)
		tl := r.Body["tools"].([]any)
		assert.Contains(t, mustJSON(tl[len(tl)-1]), `"cache_control"`)
		assert.Equal(t, 1, strings.Count(mustJSON(r.Body["tools"]), `"cache_control"`))
		assert.True(t, endsCached(msgs[len(msgs)-1]), "request %d: the newest turn", i+1)
		if len(msgs) > 1 {
			assert.True(t, endsCached(msgs[len(msgs)-2]), "request %d: the earlier turns", i+1)
		}
		assert.LessOrEqual(t, strings.Count(r.Raw, `"cache_control"`), 4)
	}
	// Request 3: the two results, each the one user message after its
	// assistant turn; the second marked served.
	msgs := reqs[2].Body["messages"].([]any)
	require.Len(t, msgs, 5)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	assert.Equal(t, []string{"user", "assistant", "user", "assistant", "user"}, roles)
	first := mustJSON(msgs[2])
	assert.Contains(t, first, `"tool_use_id":"toolu_1"`)
	assert.Contains(t, first, `re_1`, "billing's refund id")
	served := mustJSON(msgs[4])
	assert.Contains(t, served, `"tool_use_id":"toolu_2"`)
	assert.Contains(t, served, `served_from_log`)
	assert.Contains(t, mustJSON(msgs[3]), `Refunding once more, to be sure.`)
	// Request 4, the next run: the first run's conversation, its answer,
	// then the new question.
	msgs = reqs[3].Body["messages"].([]any)
	require.Len(t, msgs, 7)
	assert.Contains(t, mustJSON(msgs[5]), "Refunded ord-4821.")
	assert.Contains(t, mustJSON(msgs[6]), "Did the refund go through?")

	// The key never enters history (payloads decoded before the search).
	text := payloadText(t, history(t, c, thread, ""))
	assert.Contains(t, text, "Yes: one refund", "control: the decoded payloads hold the answer")
	assert.NotContains(t, text, key)
}

// A rate limit the model does not wait out in the activity (MaxRetries -1
// here) fails the attempt with the API's retry-after as the next retry's
// delay: Temporal retries the model activity after it and the run
// completes. A 400 fails the run at once, non-retryable, with the stable
// type anthropic.Rejected: asked once.
func TestAnthropicRetryAndRejection(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	var mu sync.Mutex
	var times []time.Time
	stamp := func(r anthropictest.Reply) anthropictest.Reply {
		return func(w http.ResponseWriter, stream bool) {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			r(w, stream)
		}
	}
	start := func(t *testing.T, srv *anthropictest.Server) (*agent.Result, error) {
		m, err := anthropicmodel.New(anthropicmodel.Options{Model: "claude-test", BaseURL: srv.URL, MaxRetries: -1})
		require.NoError(t, err)
		plugin, err := tulip.NewPlugin(tulip.Options{Models: map[string]tulip.Model{"claude": m}})
		require.NoError(t, err)
		c := dial(t, server.Address())
		tq := taskQueue(t.Name())
		w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
		run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "claude", Message: "hello"})
		require.NoError(t, err)
		return run.Await(ctxT(t))
	}

	t.Run("429", func(t *testing.T) {
		srv := anthropictest.New(
			stamp(anthropictest.Status(429, "rate_limit_error", "slow down", "Retry-After", "3")),
			stamp(anthropictest.Text("Hello.")))
		defer srv.Close()
		res, err := start(t, srv)
		require.NoError(t, err)
		assert.Equal(t, "Hello.", res.Answer)
		require.Len(t, times, 2)
		gap := times[1].Sub(times[0])
		assert.GreaterOrEqual(t, gap, 2900*time.Millisecond, "Temporal retried after retry-after (its own backoff: 1 s)")
		t.Logf("retried after %s", gap.Round(time.Millisecond))
	})
	t.Run("400", func(t *testing.T) {
		srv := anthropictest.New(anthropictest.Status(400, "invalid_request_error", "max_tokens: too large"))
		defer srv.Close()
		res, err := start(t, srv)
		var failed *agent.RunFailedError
		require.ErrorAs(t, err, &failed)
		assert.True(t, hasErrorType(err, anthropicmodel.ErrRejected), "%v", err)
		require.NotNil(t, res)
		assert.Equal(t, agent.Failed, res.Status)
		assert.Contains(t, res.Error, "invalid_request_error")
		assert.Len(t, srv.Requests(), 1, "non-retryable: asked once")
	})
}

// endsCached says whether message m's last block carries cache_control.
func endsCached(m any) bool {
	blocks, _ := m.(map[string]any)["content"].([]any)
	if len(blocks) == 0 {
		return false
	}
	_, ok := blocks[len(blocks)-1].(map[string]any)["cache_control"]
	return ok
}

// stripCache is v without its cache_control fields (which move as the
// conversation grows).
func stripCache(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "cache_control")
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(out)
	return out
}

// 'tulip chat --provider anthropic' runs the support agent on Anthropic's
// Messages API (a loopback one): the re-emitted refund is served, the body
// ran once, and the key went in x-api-key from ANTHROPIC_API_KEY, the
// default for the provider. A provider the CLI does not know is refused
// with its usage.
func TestCLIChatAnthropic(t *testing.T) {
	srv := anthropictest.New(
		anthropictest.ToolUse("toolu_a", "issue_refund", `{"order_id": "ord-1", "amount": 5}`),
		anthropictest.ToolUse("toolu_b", "issue_refund", `{"order_id": "ord-1", "amount": 5.0}`),
		anthropictest.Text("Done."),
	)
	defer srv.Close()
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-cli-test")
	stdout, stderr, code := runCLI(t, "chat", "--provider", "anthropic", "--base-url", srv.URL, "--model", "claude-test", "--json",
		"--address", server.Address(), "refund ord-1")
	require.Equal(t, 0, code, stderr)
	lines, sum := parseTrace(t, stdout)
	require.Len(t, lines, 2)
	assert.Equal(t, "executed", string(lines[0].Outcome))
	assert.Equal(t, "cached", string(lines[1].Outcome), "the re-emitted refund is served")
	assert.Equal(t, 1, sum.BodyInvocations["issue_refund"])
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		assert.Equal(t, "sk-ant-cli-test", r.Header.Get("x-api-key"))
	}
	assert.Empty(t, srv.Violations())

	_, stderr, code = runCLI(t, "chat", "--provider", "gemini", "--model", "m", "--address", server.Address(), "hi")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `--provider "gemini"`)
}
