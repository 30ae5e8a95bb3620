package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// An approval sent twice by update, the second as the run ends (a
// double click): the run takes the first and closes before it takes the
// second, which the server then drops. The second answer is told the run
// is closed (it waited out the server's one-minute poll before, and
// failed with a timeout), the held call ran once, and the run completed.
// Its runs continue as new every 2 turns, as the soak's do (where it was
// found: a reference run took a minute). A second answer the run took
// before closing would be a duplicate (nil); one it did not is closed.
func TestResumeTwiceAsTheRunEnds(t *testing.T) {
	_, tb := billedToolbox(t)
	c := dial(t, server.Address())
	tq := taskQueue("resume-twice")
	model := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		switch {
		case req.Turn == 4:
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "iso", Name: "isolate_host", Arguments: `{"host":"web-1"}`}}}, nil
		case req.Turn <= 5:
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: fmt.Sprintf("r%d", req.Turn), Name: "issue_refund", Arguments: `{"order_id":"ord-1","amount":10}`}}}, nil
		}
		return activities.ModelResponse{Text: "done"}, nil
	})
	startWorker(t, c, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"m": model}})
	thread := fmt.Sprintf("resume-twice-%d", time.Now().UnixNano())
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", ThreadID: thread, Message: "go",
		Hooks: []string{"approve_isolate_host"}, WorkflowTaskTimeout: 2 * time.Second, ContinueAfterTurns: 2})
	require.NoError(t, err)
	res, err := runclient.Await(ctxT(t), c, h, "")
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	in := agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true}
	_, err = runclient.Resume(ctxT(t), c, thread, in)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = runclient.Resume(ctx, c, thread, in)
	t.Logf("the second answer: %v, after %s", err, time.Since(t0).Round(time.Millisecond))
	var closed *runclient.NotInterruptedError
	if err != nil {
		require.True(t, errors.As(err, &closed), "the second answer: %v", err)
	}
	res, err = runclient.Await(ctxT(t), c, h, in.InterruptID)
	require.NoError(t, err)
	assert.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, 1, tb.Invocations()["isolate_host"], "the approved call ran once")
}
