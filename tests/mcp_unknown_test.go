package tests

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/mcp"
	"github.com/tulip-temporal/tulip/mcp/mcptest"
)

// An MCP tool's call whose connection broke after the request went out
// has an unknown outcome: mcptest.RefundServer, a real MCP server over
// HTTP on loopback whose refund tool ignores keys, loses the first
// refund's answer with its connection. With the check the server's config names
// (Checks: refund -> refund_status), the run asks the server by key and
// records its answer: the order is refunded once, at a service that
// ignores keys. Untrusted, with no check, the tool holds: a person says
// what happened, and it is refunded once. The control, the server's tools
// on retry: Temporal runs the call again, and the order is refunded
// twice. Each run's history replays.
func TestMCPUnknownOutcome(t *testing.T) {
	c := dial(t, server.Address())
	for _, mode := range []string{"check", "hold", "retry"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			rm := mcptest.NewRefundServer()
			t.Cleanup(rm.Close)
			rm.LoseNextAnswer()
			cfg := mcp.Server{Name: "refunds", URL: rm.URL}
			switch mode {
			case "check":
				cfg.Checks = map[string]string{"refund": "refund_status"}
			case "retry":
				cfg.OnUnknown = "retry"
			}
			ts, err := mcp.New(cfg, mcp.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = ts.Close() })
			order := "ord-mcp-" + mode
			model := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
				if req.Turn == 1 {
					return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "c1", Name: "refund", Arguments: `{"order":"` + order + `"}`}}}, nil
				}
				return tulip.ModelResponse{Text: "done"}, nil
			})
			opts := tulip.Options{Tools: []tulip.Toolset{ts}, Models: map[string]tulip.Model{"m": model}}
			tq := taskQueue("mcp-unknown-" + mode)
			startPublicWorker(t, c, tq, opts)
			run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", Message: "refund it"})
			require.NoError(t, err)
			res, err := run.Await(ctxT(t))
			require.NoError(t, err)
			if mode == "hold" {
				require.Equal(t, agent.Interrupted, res.Status, "%+v", res)
				require.Equal(t, agent.UnknownHook, res.Interrupt.Hook)
				assert.Equal(t, 1, rm.Refunds(order), "nothing ran again while the run waits")
				_, err = run.Resume(ctxT(t), agent.ClientResults(res.Interrupt.ID, agent.ToolResult{CallID: "c1", Output: `{"refund_id":"re-` + order + `-1"}`}))
				require.NoError(t, err)
				res, err = run.Await(ctxT(t))
				require.NoError(t, err)
			}
			require.Equal(t, agent.Completed, res.Status, "%+v", res)
			line := res.Trace[len(res.Trace)-1]
			if mode == "retry" {
				assert.Equal(t, 2, rm.Refunds(order), "Temporal ran the call again: refunded twice")
				assert.Nil(t, line.Unknown)
				return
			}
			assert.Equal(t, 1, rm.Refunds(order), "refunded once")
			require.NotNil(t, line.Unknown)
			t.Logf("%s: %+v, result %s", mode, *line.Unknown, line.Result)
			assert.Contains(t, line.Unknown.Cause, "ambiguous error")
			assert.JSONEq(t, `{"refund_id":"re-`+order+`-1"}`, string(line.Result))
			if mode == "check" {
				assert.Equal(t, "applied", line.Unknown.Resolution)
				assert.Equal(t, 1, line.Unknown.Checks)
			} else {
				assert.Equal(t, "answered", line.Unknown.Resolution)
			}
			file := filepath.Join(t.TempDir(), "h.json")
			writeHistory(t, c, runclient.Handle{WorkflowID: run.ID(), RunID: run.RunID()}, file)
			require.NoError(t, tulip.ReplayHistories(opts, tulip.ReplayOptions{}, file))
		})
	}
}

// listOnly is a toolset of one tool that checks its lost calls, and has
// no Check method to ask.
type listOnly struct{}

func (listOnly) Name() string { return "list-only" }
func (listOnly) Tools(context.Context) ([]tulip.ToolSpec, error) {
	return []tulip.ToolSpec{{Name: "pay", OnUnknown: "check"}}, nil
}
func (listOnly) Call(context.Context, tulip.ToolInput) (tulip.ToolOutput, error) {
	return tulip.ToolOutput{}, nil
}

// A toolset may list a tool that checks only if it has a Check method: a
// worker with one that has none does not start, and says why in one line.
func TestToolsetCheckNeedsCheckMethod(t *testing.T) {
	c := dial(t, server.Address())
	plugin, err := tulip.NewPlugin(tulip.Options{Tools: []tulip.Toolset{listOnly{}}})
	require.NoError(t, err)
	w := sdkworker.New(c, taskQueue("list-only"), sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	err = w.Start()
	require.Error(t, err)
	defer w.Stop()
	assert.Contains(t, err.Error(), `toolset "list-only": tool pay: OnUnknown "check", but the toolset has no Check method`)
}
