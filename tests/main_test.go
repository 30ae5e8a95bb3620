// Package tests holds tulip's integration tests: real runs on the embedded
// Temporal server, replay of recorded histories, the CLI in process, and
// the benchmarks that need a server.
package tests

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// server is the embedded server shared by the tests of this package.
var server *devserver.Server

func TestMain(m *testing.M) {
	// Every workflow task replays the whole history: the dedup log must be
	// rebuilt from history on every step, not kept in a worker's cache.
	sdkworker.SetStickyWorkflowCacheSize(0)
	// The CLI's workers on a named server keep threads in the user's
	// state directory: the tests' own, removed at the end.
	state, err := os.MkdirTemp("", "tulip-tests-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", state)
	srv, err := devserver.Start(devserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded server:", err)
		os.Exit(1)
	}
	server = srv
	code := m.Run()
	srv.Stop()
	stopSharedS3()
	_ = os.RemoveAll(state)
	if soakBinDir != "" {
		_ = os.RemoveAll(soakBinDir)
	}
	os.Exit(code)
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func dial(t testing.TB, addr string) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

var queues atomic.Int64

func taskQueue(name string) string {
	return fmt.Sprintf("test-%s-%d-%d", name, time.Now().UnixNano(), queues.Add(1))
}

// startWorker runs a worker with the tulip plugin until the test ends.
func startWorker(t testing.TB, c client.Client, tq string, opts workerplugin.Options) sdkworker.Worker {
	t.Helper()
	plugin, err := workerplugin.NewPlugin(opts)
	require.NoError(t, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return w
}

// startPublicWorker is startWorker through the public API: tulip.NewPlugin
// over opts.
func startPublicWorker(t testing.TB, c client.Client, tq string, opts tulip.Options) sdkworker.Worker {
	t.Helper()
	plugin, err := tulip.NewPlugin(opts)
	require.NoError(t, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return w
}

// toolsets are the module's own Go tools as tulip.Options.Tools takes
// them.
func toolsets(tools ...*activities.Tool) []tulip.Toolset {
	out := make([]tulip.Toolset, len(tools))
	for i, t := range tools {
		out[i] = activities.InternalToolset(t).(tulip.Toolset)
	}
	return out
}

// publicHooks are the module's own hooks (the demo's) as tulip.Options
// takes them.
func publicHooks(in map[string]hooks.Hook) map[string]tulip.Hook {
	out := make(map[string]tulip.Hook, len(in))
	for name, h := range in {
		out[name] = hooks.Internal(h).(tulip.Hook)
	}
	return out
}

func history(t testing.TB, c client.Client, workflowID, runID string) *historypb.History {
	t.Helper()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

func eventTypes(h *historypb.History) []string {
	out := make([]string, len(h.Events))
	for i, e := range h.Events {
		out[i] = e.GetEventType().String()
	}
	return out
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
