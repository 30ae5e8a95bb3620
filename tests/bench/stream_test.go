package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/streams"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// chattyRun is n turns of one refund each with a sentence of text (40
// words), then a final answer: a run with something to say every turn.
func chattyRun(n int) scenario.Run {
	var turns []scenario.Turn
	for i := range n {
		text := fmt.Sprintf("Turn %d: ", i) + strings.Repeat("refunding the order now, ", 10)
		turns = append(turns, scenario.Turn{Text: &text, ToolCalls: []threadstate.ToolCall{{ID: fmt.Sprintf("c%d", i), Name: "issue_refund",
			Arguments: fmt.Sprintf(`{"order_id": "ord-%d", "amount": 120.0}`, i)}}})
	}
	done := "All " + fmt.Sprint(n) + " refunds are done."
	return scenario.Run{Turns: append(turns, scenario.Turn{Text: &done})}
}

// wordByWord streams a model's text a word every perWord, as a model
// generating it would (through the activity's OnText, as the
// OpenAI-compatible model does from server-sent events).
func wordByWord(m activities.Model, perWord time.Duration) activities.Model {
	return activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		resp, err := m.Respond(ctx, req)
		if err != nil || req.OnText == nil {
			return resp, err
		}
		for _, w := range strings.SplitAfter(resp.Text, " ") {
			time.Sleep(perWord)
			req.OnText(w)
		}
		return resp, nil
	})
}

// BenchmarkStreamHistory measures what a live run adds to its history: the
// same 1,000-turn run (a refund and 40 words of text per turn, the text
// generated at 10 ms a word; continue-as-new every 250 turns) with its
// stream off, with the default stream (decisions and whole answers,
// published by the workflow) unread and read by a subscriber, and with the
// text streamed as generated (pieces by signal every 300 ms) and read. It
// reports each arm's events and history bytes over the whole chain, their
// ratios to the stream turned off, and the largest run's history bytes
// over the first's (linear history: about 1). TULIP_BENCH_TURNS sets the
// turns (about 15 minutes at 1,000 on 2 cores).
//
//	go test ./tests/bench -run '^$' -bench StreamHistory -benchtime 1x -timeout 60m
func BenchmarkStreamHistory(b *testing.B) {
	turns := 1000
	if n, err := strconv.Atoi(os.Getenv("TULIP_BENCH_TURNS")); err == nil && n > 0 {
		turns = n
	}
	srv, err := devserver.Start(devserver.Options{})
	require.NoError(b, err)
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: quiet()})
	require.NoError(b, err)
	defer c.Close()
	tq := fmt.Sprintf("bench-stream-%d", time.Now().UnixNano())
	run := chattyRun(turns)
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"m": wordByWord(run.Model(), 10*time.Millisecond)}})
	require.NoError(b, err)
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	require.NoError(b, w.Start())
	defer w.Stop()

	arms := []struct {
		name   string
		stream *agentrun.StreamOptions
		read   bool
	}{
		{"off", &agentrun.StreamOptions{Off: true}, false},
		{"calls-unread", nil, false},
		{"calls-read", nil, true},
		{"text-read", &agentrun.StreamOptions{Text: true}, true},
	}
	for b.Loop() {
		events, size, runs, largest := map[string]int{}, map[string]int{}, map[string]int{}, map[string]float64{}
		gap := map[string]time.Duration{} // the longest wait for a subscriber's next item
		for _, arm := range arms {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			h, err := runclient.Start(ctx, c, runclient.RunOptions{TaskQueue: tq, Model: "m", MaxTurns: turns + 1, Stream: arm.stream})
			require.NoError(b, err)
			items := make(chan int, 1)
			if arm.read {
				go func() {
					n, last := 0, time.Now()
					err := streams.Subscribe(ctx, c, h.WorkflowID, streams.SubscribeOptions{RunID: h.RunID}, func(streams.Item) error {
						n++
						gap[arm.name] = max(gap[arm.name], time.Since(last))
						last = time.Now()
						return nil
					})
					if err != nil {
						b.Errorf("%s: subscribe: %v", arm.name, err)
					}
					items <- n
				}()
			}
			res, err := runclient.Await(ctx, c, h, "")
			require.NoError(b, err)
			require.Equal(b, agentrun.StatusCompleted, res.Status)
			if arm.read {
				require.Positive(b, <-items, "%s: the subscriber read nothing", arm.name)
			}
			var runBytes []int
			for runID := h.RunID; runID != ""; {
				it := c.GetWorkflowHistory(ctx, h.WorkflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
				runID, runBytes = "", append(runBytes, 0)
				for it.HasNext() {
					ev, err := it.Next()
					require.NoError(b, err)
					events[arm.name]++
					size[arm.name] += proto.Size(ev)
					runBytes[len(runBytes)-1] += proto.Size(ev)
					if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
						runID = a.GetNewExecutionRunId()
					}
				}
			}
			largest[arm.name] = float64(slices.Max(runBytes)) / float64(runBytes[0])
			runs[arm.name] = len(runBytes)
			cancel()
		}
		for _, arm := range arms {
			b.ReportMetric(float64(events[arm.name]), "events-"+arm.name)
			b.ReportMetric(float64(runs[arm.name]), "runs-"+arm.name)
			b.ReportMetric(largest[arm.name], "largest/first-run-bytes-"+arm.name)
			if arm.read {
				b.ReportMetric(gap[arm.name].Seconds(), "max-gap-s-"+arm.name)
			}
			if arm.name != "off" {
				b.ReportMetric(float64(events[arm.name])/float64(events["off"]), "events-"+arm.name+"/off")
				b.ReportMetric(float64(size[arm.name])/float64(size["off"]), "bytes-"+arm.name+"/off")
			}
		}
	}
}
