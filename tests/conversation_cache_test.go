package tests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// A worker's conversation cache bounded at 1 MiB, and a run whose tool
// results are 600 KB each: the conversation outgrows the bound by the
// second result, so the cache cannot hold it, and each model call reads
// what the cache let go from the run (a query). Every call sees every
// result whole, and the cache never keeps more than its bound alive.
func TestConversationCacheBytesRepages(t *testing.T) {
	const bound, size, calls = 1 << 20, 600 << 10, 4
	cache := activities.NewConversationCacheBytes(0, bound)
	big := activities.MustTool(protocol.ToolSpec{Name: "big_page"},
		func(_ context.Context, a struct {
			N int `json:"n"`
		}) (map[string]string, error) {
			return map[string]string{"page": strings.Repeat(fmt.Sprint(a.N%10), size)}, nil
		})
	var mu sync.Mutex
	var overBound int // model calls whose conversation was over the bound
	var cacheBytes []int64
	model := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		results, total := 0, 0
		for _, m := range req.Messages {
			total += len(m.Content)
			if m.Role == "tool" {
				if !strings.Contains(m.Content, strings.Repeat(fmt.Sprint((results+1)%10), size)) {
					return activities.ModelResponse{}, fmt.Errorf("tool result %d is not whole (%d bytes)", results+1, len(m.Content))
				}
				results++
			}
		}
		if total > bound {
			overBound++
		}
		cacheBytes = append(cacheBytes, cache.Bytes())
		if results < calls {
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: fmt.Sprint("c", results+1), Name: "big_page",
				Arguments: fmt.Sprintf(`{"n": %d}`, results+1)}}}, nil
		}
		return activities.ModelResponse{Text: "read them all"}, nil
	})
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{big}, Models: map[string]activities.Model{"m": model},
		ConversationCache: cache})
	_, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "read the pages"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status, "%v", res.Error)
	assert.Equal(t, "read them all", res.Answer)
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, overBound, 2, "conversations over the bound: the cache could not hold them; they were read from the run")
	for i, b := range cacheBytes {
		assert.LessOrEqual(t, b, int64(bound), "model call %d: the cache keeps at most its bound", i+1)
	}
	assert.LessOrEqual(t, cache.Bytes(), int64(bound))
}
