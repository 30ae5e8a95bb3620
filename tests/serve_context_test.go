package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
)

// windowModel is an OpenAI-compatible endpoint whose context window is
// budget tokens (its text bytes / 4): over it, it refuses as OpenAI does
// (400, context_length_exceeded). It answers each request with one line,
// and a summary request (tulip's summary instructions in the system
// prompt) with a short summary.
type windowModel struct {
	*httptest.Server
	budget int

	mu                        sync.Mutex
	requests, summaries, over int
}

func newWindowModel(t *testing.T, budget int) *windowModel {
	m := &windowModel{budget: budget}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n, summary := 0, false
		for _, msg := range req.Messages {
			n += len(msg.Content) + 8
			summary = summary || msg.Role == "system" && strings.Contains(msg.Content, activities.SummaryInstructions)
		}
		for _, tl := range req.Tools {
			n += len(tl)
		}
		tokens := (n + 3) / 4
		m.mu.Lock()
		m.requests++
		if summary {
			m.summaries++
		}
		over := tokens > m.budget
		if over {
			m.over++
		}
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if over {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"maximum context length is %d tokens, your messages resulted in %d","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, m.budget, tokens)
			return
		}
		text := fmt.Sprintf("noted (%d tokens)", tokens)
		if summary {
			text = "Summary: the user sent long notes about ord-5 and asked for them to be noted."
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "window",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5}})
	}))
	t.Cleanup(m.Close)
	return m
}

// tulip serve honours the Responses API's truncation on a thread that
// outgrows its model's window (--context-tokens 3000, long user notes
// each turn): with "auto" (and by default) the thread keeps answering,
// its model's view compacted, and no request over the window reaches the
// model; with "disabled" the turn that would pass the window is refused
// with 400 context_length_exceeded, as OpenAI refuses it.
func TestServeTruncation(t *testing.T) {
	m := newWindowModel(t, 3000)
	base, _ := startServe(t, "--address", server.Address(), "--task-queue", taskQueue(t.Name()), "--base-url", m.URL+"/v1",
		"--model", "window", "--api-key-env", "TULIP_TEST_NO_KEY", "--context-tokens", "3000")
	oc := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := ctxT(t)
	note := func(i int) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("note %d about ord-5: %s", i, strings.Repeat("the parcel was late. ", 100)))}
	}

	t.Run("auto", func(t *testing.T) {
		prev, compactions := "", 0
		for i := range 12 {
			p := responses.ResponseNewParams{Model: "support", Input: note(i)}
			if i%2 == 1 {
				p.Truncation = responses.ResponseNewParamsTruncationAuto // said, or left to the default
			}
			if prev != "" {
				p.PreviousResponseID = openai.String(prev)
			}
			r, err := oc.Responses.New(ctx, p)
			require.NoError(t, err, "turn %d", i)
			require.Equal(t, responses.ResponseStatusCompleted, r.Status, "turn %d", i)
			assert.Equal(t, "auto", string(r.Truncation))
			var ext struct {
				Tulip struct {
					Compactions []struct {
						Upto, Budget int
					} `json:"compactions"`
				} `json:"tulip"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.RawJSON()), &ext))
			compactions += len(ext.Tulip.Compactions)
			for _, c := range ext.Tulip.Compactions {
				assert.Equal(t, 3000, c.Budget)
			}
			prev = r.ID
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		assert.Zero(t, m.over, "no request over the window reached the model")
		assert.Greater(t, m.summaries, 0, "the thread's view was compacted")
		assert.Greater(t, compactions, 0, "responses said so in their tulip extension")
	})

	t.Run("disabled", func(t *testing.T) {
		prev := ""
		for i := range 12 {
			p := responses.ResponseNewParams{Model: "support", Input: note(i), Truncation: responses.ResponseNewParamsTruncationDisabled}
			if prev != "" {
				p.PreviousResponseID = openai.String(prev)
			}
			r, err := oc.Responses.New(ctx, p)
			if err != nil {
				e := apiErr(t, err)
				assert.Equal(t, http.StatusBadRequest, e.StatusCode)
				assert.Equal(t, "context_length_exceeded", e.Code)
				assert.Greater(t, i, 2, "the first turns fit")
				return
			}
			assert.Equal(t, "disabled", string(r.Truncation))
			prev = r.ID
		}
		t.Fatal("a thread past the window with truncation disabled was never refused")
	})

	t.Run("bad value", func(t *testing.T) {
		_, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: note(0), Truncation: "sometimes"})
		e := apiErr(t, err)
		assert.Equal(t, http.StatusBadRequest, e.StatusCode)
		assert.Equal(t, "truncation", e.Param)
	})
}
