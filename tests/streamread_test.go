package tests

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/streams"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// queryCounter is a client that counts its queries.
type queryCounter struct {
	client.Client
	n atomic.Int64
}

func (q *queryCounter) QueryWorkflowWithOptions(ctx context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	q.n.Add(1)
	return q.Client.QueryWorkflowWithOptions(ctx, req)
}

// updateEvents counts the update accepted and completed events in the
// histories of a workflow's chain.
func updateEvents(t *testing.T, c client.Client, workflowID string) (accepted, completed int) {
	t.Helper()
	for _, run := range chainRuns(t, c, workflowID) {
		for _, ev := range history(t, c, workflowID, run).GetEvents() {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				accepted++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
				completed++
			}
		}
	}
	return accepted, completed
}

// Reading a run's live stream adds nothing to its history: one and then
// three readers Watch a run whose answer streams in pieces, each reads
// every piece while the run goes on and the Done item, and the run's
// history has no update event; the control, the protocol's poll update
// (UpdatePoll), reads the same and adds two events a poll.
func TestStreamReadAddsNoHistory(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	model := newSlowModel(t, 1, 60*time.Millisecond)
	oai, err := openaimodel.New(openaimodel.Options{BaseURL: model.URL + "/v1", Model: "fake"})
	require.NoError(t, err)
	startWorker(t, c, tq, workerplugin.Options{Models: map[string]activities.Model{"stream": activities.PublicModel(oai)}})

	watch := func(readers int, poll bool) (accepted, completed int, queries int64) {
		qc := &queryCounter{Client: c}
		h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "stream", Message: "report",
			Stream: &agentrun.StreamOptions{Text: true, BatchMillis: 50}})
		require.NoError(t, err)
		var wg sync.WaitGroup
		texts := make([]string, readers)
		dones := make([]bool, readers)
		errs := make([]error, readers)
		for i := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if poll {
					errs[i] = streams.Subscribe(ctxT(t), qc, h.WorkflowID, streams.SubscribeOptions{RunID: h.RunID, UpdatePoll: true},
						func(it streams.Item) error {
							var ti protocol.TextItem
							if it.Topic == protocol.TopicText && it.Decode(&ti) == nil {
								texts[i] += ti.Delta
								dones[i] = dones[i] || ti.Done
							}
							return nil
						})
					return
				}
				errs[i] = agent.Attach(qc, h.WorkflowID, h.RunID).Watch(ctxT(t), 0, func(ev agent.Event) error {
					if ev.Text != nil {
						texts[i] += ev.Text.Delta
						dones[i] = dones[i] || ev.Text.Done
					}
					return nil
				})
			}()
		}
		res, err := runclient.Await(ctxT(t), c, h, "")
		require.NoError(t, err)
		require.Equal(t, agentrun.StatusCompleted, res.Status)
		wg.Wait()
		for i := range readers {
			require.NoError(t, errs[i], "reader %d ends with the run", i)
			assert.Equal(t, model.text(1), texts[i], "reader %d read every piece", i)
			assert.True(t, dones[i], "reader %d read the Done item", i)
		}
		accepted, completed = updateEvents(t, c, h.WorkflowID)
		return accepted, completed, qc.n.Load()
	}

	for _, readers := range []int{1, 3} {
		a, cpl, q := watch(readers, false)
		t.Logf("read query, %d readers: %d update accepted, %d completed events; %d queries", readers, a, cpl, q)
		assert.Zero(t, a+cpl, "readers by query add no update event")
		assert.Positive(t, q, "the readers read by query")
	}
	a, cpl, q := watch(1, true)
	t.Logf("poll update (control), 1 reader: %d update accepted, %d completed events; %d queries", a, cpl, q)
	assert.Positive(t, a, "the poll update adds events: the count can fail")
	assert.Equal(t, a, cpl)
	assert.Zero(t, q)
}

// A reader watching a run held by an approval for 5 s adds no event to
// its history, and reads about twice a second.
func TestStreamIdleReaderAddsNoHistory(t *testing.T) {
	run := scenario.Run{Turns: []scenario.Turn{turn(call("c1", "refund_order", `{"order_id": "ord-1", "amount": 10}`))}}
	w := newApprovalWorld(t, run)
	c := dial(t, server.Address())
	h, res, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: w.tq, Model: "m"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	before := len(history(t, c, h.WorkflowID, h.RunID).GetEvents())

	qc := &queryCounter{Client: c}
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	var events int
	start := time.Now()
	err = agent.Attach(qc, h.WorkflowID, h.RunID).Watch(ctx, 0, func(agent.Event) error { events++; return nil })
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Positive(t, events, "the reader read the held call's item")
	after := len(history(t, c, h.WorkflowID, h.RunID).GetEvents())
	assert.Equal(t, before, after, "an idle reader adds no event")
	rate := float64(qc.n.Load()) / took.Seconds()
	t.Logf("idle reader: %d queries in %s (%.1f a second); history %d events before, %d after", qc.n.Load(), took.Round(time.Millisecond), rate, before, after)
	assert.Less(t, rate, 10.0, fmt.Sprintf("an idle reader backs off (%.1f queries a second)", rate))
}

// oldStreamWorkflow is a run of a worker older than the read query: its
// stream answers the poll update only (two items, then it closes once
// they were polled).
func oldStreamWorkflow(ctx wf.Context) error {
	polled := false
	if err := wf.SetUpdateHandler(ctx, streams.PollUpdate, func(ctx wf.Context, in streams.PollInput) (streams.PollResult, error) {
		res := streams.PollResult{Items: []streams.WireItem{}, NextOffset: 2}
		for off := in.FromOffset; off < 2; off++ {
			data, _ := streams.Encode(fmt.Sprint("item ", off))
			res.Items = append(res.Items, streams.WireItem{Topic: "t", Data: data, Offset: off})
		}
		polled = polled || in.FromOffset >= 2 || len(res.Items) > 0
		return res, nil
	}); err != nil {
		return err
	}
	return wf.Await(ctx, func() bool { return polled })
}

// A run without the read query (an older worker's) is read by the poll
// update: Subscribe's query fails as unknown (QueryFailed) and it polls.
func TestStreamReadFallsBackToPoll(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	w := sdkworker.New(c, tq, sdkworker.Options{})
	w.RegisterWorkflow(oldStreamWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{TaskQueue: tq}, oldStreamWorkflow)
	require.NoError(t, err)
	var got []string
	require.NoError(t, streams.Subscribe(ctxT(t), c, run.GetID(), streams.SubscribeOptions{RunID: run.GetRunID()}, func(it streams.Item) error {
		var v string
		require.NoError(t, it.Decode(&v))
		got = append(got, v)
		return nil
	}))
	assert.Equal(t, []string{"item 0", "item 1"}, got)
	a, cpl := updateEvents(t, c, run.GetID())
	assert.Positive(t, a+cpl, "read by the poll update")
}
