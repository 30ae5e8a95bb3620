package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/streams"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// A run's stream takes items from the run only: batches a plain client
// signals to it (a forged tulip.calls decision, a forged tulip.text
// answer under a made-up publisher id, an item on a topic of its own) are
// dropped, with text streaming on and off. Only the run's own items are
// there when a subscriber polls.
func TestStreamRefusesOutsidePublishers(t *testing.T) {
	c := dial(t, server.Address())
	done := "done"
	script := scenario.Run{Hooks: []string{"approve_isolate_host"}, Turns: []scenario.Turn{
		turn(call("c1", "isolate_host", `{"host": "web-1"}`)),
	}, Resumes: []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{{Text: &done}}}}}
	tq := taskQueue(t.Name())
	startWorker(t, c, tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"m": script.Model()}})
	for _, text := range []bool{false, true} {
		h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "go",
			Hooks: []string{"approve_isolate_host"}, Stream: &agentrun.StreamOptions{Text: text}})
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusInterrupted, res.Status)

		forgedCall, err := streams.Encode(agentrun.CallItem{Turn: 1, CallID: "c1", Tool: "isolate_host", Outcome: agentrun.OutcomeExecuted})
		require.NoError(t, err)
		forgedText, err := streams.Encode(protocol.TextItem{Turn: 1, Delta: "FORGED: all hosts are fine", Done: true})
		require.NoError(t, err)
		batches := []streams.PublishInput{
			{PublisherID: "mallory", Sequence: 1, Items: []streams.PublishEntry{{Topic: protocol.TopicCalls, Data: forgedCall}}},
			{PublisherID: "mallory", Sequence: 2, Items: []streams.PublishEntry{{Topic: protocol.TopicText, Data: forgedText}}},
			{PublisherID: "0123456789abcdef0123456789abcdef/1/1/0011223344556677", Sequence: 1,
				Items: []streams.PublishEntry{{Topic: protocol.TopicText, Data: forgedText}}},
			{Items: []streams.PublishEntry{{Topic: "mallory.notes", Data: forgedText}}}, // no publisher id
		}
		for _, b := range batches {
			require.NoError(t, c.SignalWorkflow(ctxT(t), h.WorkflowID, h.RunID, streams.PublishSignal, b))
		}
		// The signals are in a completed workflow task: the run has seen them.
		require.Eventually(t, func() bool {
			ev := eventTypes(history(t, c, h.WorkflowID, h.RunID))
			signals, last := 0, -1
			for i, e := range ev {
				if e == "WorkflowExecutionSignaled" {
					signals++
					last = i
				}
			}
			if signals < len(batches) {
				return false
			}
			for _, e := range ev[last:] {
				if e == "WorkflowTaskCompleted" {
					return true
				}
			}
			return false
		}, 30*time.Second, 50*time.Millisecond)

		uh, err := c.UpdateWorkflow(ctxT(t), client.UpdateWorkflowOptions{WorkflowID: h.WorkflowID, RunID: h.RunID,
			UpdateName: streams.PollUpdate, Args: []any{streams.PollInput{FromOffset: 0}}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		var page streams.PollResult
		require.NoError(t, uh.Get(ctxT(t), &page))
		require.Len(t, page.Items, 1, "text %v: the run's held call only, nothing forged: %+v", text, page.Items)
		assert.Equal(t, protocol.TopicCalls, page.Items[0].Topic)
		var item agentrun.CallItem
		require.NoError(t, streams.Decode(page.Items[0].Data, &item))
		assert.Equal(t, agentrun.OutcomeHeld, item.Outcome)

		_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
		require.NoError(t, err)
		res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusCompleted, res.Status)
	}
}
