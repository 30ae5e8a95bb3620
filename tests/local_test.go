package tests

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// localTools are two tools declared Local, counting their bodies' runs
// and the downstream keys they saw: lookup_fast (idempotent) and
// stamp_fast (not).
type localTools struct {
	mu   sync.Mutex
	runs map[string]int
	keys []string
}

func (l *localTools) tools(t *testing.T) []*activities.Tool {
	body := func(name string) func(context.Context, map[string]any) (map[string]any, error) {
		return func(ctx context.Context, args map[string]any) (map[string]any, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.runs[name]++
			l.keys = append(l.keys, activities.IdempotencyKey(ctx))
			return map[string]any{"n": l.runs[name], "args": args}, nil
		}
	}
	lookup, err := activities.NewTool(protocol.ToolSpec{Name: "lookup_fast", Idempotent: true, Local: true}, body("lookup_fast"))
	require.NoError(t, err)
	stamp, err := activities.NewTool(protocol.ToolSpec{Name: "stamp_fast", Local: true}, body("stamp_fast"))
	require.NoError(t, err)
	return []*activities.Tool{lookup, stamp}
}

// A tool declared Local runs as a local activity with the contract
// unchanged: an identical idempotent call is served (in the same response
// and in a later turn) and its body runs once; a non-idempotent one runs
// each time; each execution gets its downstream key; the history has a
// marker per execution and no activity task; and it replays.
func TestLocalTools(t *testing.T) {
	c := dial(t, server.Address())
	lt := &localTools{runs: map[string]int{}}
	run := scenario.Run{Turns: []scenario.Turn{
		turn(call("c1", "lookup_fast", `{"id": 1}`), call("c2", "lookup_fast", `{"id": 1}`), call("c3", "stamp_fast", `{}`), call("c4", "stamp_fast", `{}`)),
		turn(call("c5", "lookup_fast", `{"id": 1.0}`), call("c6", "lookup_fast", `{"id": 2}`)),
	}}
	tq := taskQueue(t.Name())
	opts := workerplugin.Options{Tools: lt.tools(t), Models: map[string]activities.Model{"script": run.Model()}}
	startWorker(t, c, tq, opts)
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "script"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)

	var outcomes []string
	var keys []string
	for _, l := range res.Trace {
		outcomes = append(outcomes, l.CallID+":"+string(l.Outcome))
		if l.Outcome == agentrun.OutcomeExecuted {
			keys = append(keys, l.Key)
		}
	}
	assert.Equal(t, []string{"c1:executed", "c2:cached", "c3:executed", "c4:executed", "c5:cached", "c6:executed"}, outcomes)
	assert.Equal(t, map[string]int{"lookup_fast": 2, "stamp_fast": 2}, lt.runs, "the bodies ran once per execution")
	assert.ElementsMatch(t, keys, lt.keys, "each execution's body saw its downstream key")

	hist := history(t, c, h.WorkflowID, h.RunID)
	markers, tasks := 0, 0
	for _, e := range hist.GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				markers++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if name := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(); strings.HasPrefix(name, "tulip.tool.") {
				tasks++
			}
		}
	}
	assert.Equal(t, 4, markers, "one marker per execution, none for a served call")
	assert.Zero(t, tasks, "no tool activity task")

	path := filepath.Join(t.TempDir(), "local.json")
	writeHistory(t, c, h, path)
	assert.NoError(t, workerplugin.ReplayHistories(workerplugin.Options{Tools: opts.Tools}, workerplugin.ReplayOptions{}, path))
}
