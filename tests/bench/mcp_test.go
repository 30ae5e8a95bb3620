package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/mcp"
)

type echoArgs struct {
	Text string `json:"text"`
}

type echoOut struct {
	Echo string `json:"echo"`
}

// echo is the body of both arms: a Go tool's, and an MCP tool's.
func echo(_ context.Context, a echoArgs) (echoOut, error) { return echoOut{Echo: a.Text}, nil }

// inProcessMCP is an MCP server in this process (the Go SDK's server side
// over its in-memory transport) offering echo as "mcp_echo".
func inProcessMCP() mcp.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "mcp_echo", Annotations: &sdk.ToolAnnotations{IdempotentHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, echoOut, error) {
			out, err := echo(ctx, a)
			return nil, out, err
		})
	return mcp.Server{Name: "bench", Transport: func() (sdk.Transport, error) {
		ct, st := sdk.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}}
}

// echoRun is one response of n distinct calls of tool, run one after
// another, then a final answer.
func echoRun(tool string, n int) scenario.Run {
	calls := make([]threadstate.ToolCall, n)
	for i := range calls {
		calls[i] = threadstate.ToolCall{ID: fmt.Sprintf("c%d", i), Name: tool, Arguments: fmt.Sprintf(`{"text": "t%d"}`, i)}
	}
	done := "done"
	return scenario.Run{Turns: []scenario.Turn{{ToolCalls: calls}, {Text: &done}}}
}

func countActivities(h *historypb.History, name string) int {
	n := 0
	for _, e := range h.GetEvents() {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// BenchmarkMCPCall runs 50 sequential calls of an MCP tool (an in-process
// MCP server, over the MCP Go SDK) and of the same body as a Go tool, on
// the embedded server, the arms interleaved after a warm-up, and reports
// the median per-call latency of each and their ratio. It checks the tool
// list is read once per run.
//
//	go test ./tests/bench -run '^$' -bench MCPCall -benchtime 5x
func BenchmarkMCPCall(b *testing.B) {
	srv, err := devserver.Start(devserver.Options{})
	require.NoError(b, err)
	defer srv.Stop()
	set, err := mcp.Open(context.Background(), []mcp.Server{inProcessMCP()})
	require.NoError(b, err)
	defer set.Close()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: quiet()})
	require.NoError(b, err)
	defer c.Close()
	goEcho := activities.MustTool(protocol.ToolSpec{Name: "go_echo", Idempotent: true}, echo)
	const n = 50
	tq := fmt.Sprintf("bench-mcp-%d", time.Now().UnixNano())
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: []*activities.Tool{goEcho}, Toolsets: []activities.Toolset{activities.PublicToolset(set.Toolsets()[0])},
		Models: map[string]activities.Model{"go": echoRun("go_echo", n).Model(), "mcp": echoRun("mcp_echo", n).Model()}})
	require.NoError(b, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(b, w.Start())
	defer w.Stop()
	run := func(model string) *historypb.History {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		h, res, err := runclient.Run(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: model, SequentialCalls: true, MaxTurns: 4})
		require.NoError(b, err)
		require.Equal(b, agentrun.StatusCompleted, res.Status)
		hist := &historypb.History{}
		it := c.GetWorkflowHistory(ctx, h.WorkflowID, h.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(b, err)
			hist.Events = append(hist.Events, ev)
		}
		require.Equal(b, 1, countActivities(hist, protocol.ListToolsActivity), "the tool list is read once per run")
		return hist
	}
	run("go")
	run("mcp") // warm-up: connections, caches
	gaps := map[string]time.Duration{}
	order := []string{"go", "mcp"}
	i := 0
	for b.Loop() {
		for k := range order { // each iteration swaps which arm goes first
			model := order[(i+k)%2]
			gaps[model] += medianCallGap(run(model))
		}
		i++
	}
	goGap, mcpGap := gaps["go"], gaps["mcp"]
	b.ReportMetric(float64(goGap.Microseconds())/float64(i)/1000, "ms/call-go")
	b.ReportMetric(float64(mcpGap.Microseconds())/float64(i)/1000, "ms/call-mcp")
	b.ReportMetric(float64(mcpGap)/float64(goGap), "mcp/go")
	b.ReportMetric(1, "list-tools/run")
}
