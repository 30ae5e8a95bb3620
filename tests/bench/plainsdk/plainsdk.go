// Package plainsdk is the agent loop written plainly with the Temporal Go
// SDK, no tulip at all: each turn a model activity that returns one refund
// call, then that call's tool activity, and a last model turn that returns
// none. It is the baseline tulip's benchmarks measure against, shared by
// the benchmarks (BenchmarkCallLatency, BenchmarkThroughput) and the worker
// process of BenchmarkWorkerMemory (tests/bench/memworker), which holds its
// runs open (Held).
package plainsdk

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tulip-temporal/tulip/internal/threadstate"

	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"
	wf "go.temporal.io/sdk/workflow"
)

// Names the loop registers and answers to.
const (
	TurnsWorkflow = "bench.PlainTurns" // Turns
	HeldWorkflow  = "bench.HeldPlain"  // Held
	ModelActivity = "plain.TurnModel"  // TurnModel
	ToolActivity  = "plain.Tool"       // Tool
	TurnsQuery    = "turns"            // Held's turns done so far
	ReleaseSignal = "release"          // ends a Held run
	RefundTool    = "issue_refund"     // the tool the model calls
)

// Register registers both workflows and both activities on r.
func Register(r sdkworker.Registry) {
	r.RegisterWorkflowWithOptions(Turns, wf.RegisterOptions{Name: TurnsWorkflow})
	r.RegisterWorkflowWithOptions(Held, wf.RegisterOptions{Name: HeldWorkflow})
	r.RegisterActivityWithOptions(TurnModel, activity.RegisterOptions{Name: ModelActivity})
	r.RegisterActivityWithOptions(Tool, activity.RegisterOptions{Name: ToolActivity})
}

// Args is turn k's refund arguments, as the plain loop's and tulip's
// models call them.
func Args(k int) string { return fmt.Sprintf(`{"order_id": "ord-%d", "amount": 120.0}`, k) }

// TurnModel answers turn k of a run of turns: one refund, then nothing.
func TurnModel(_ context.Context, turn, turns int) ([]threadstate.ToolCall, error) {
	if turn > turns {
		return nil, nil
	}
	return []threadstate.ToolCall{{ID: fmt.Sprintf("c%d", turn), Name: RefundTool, Arguments: Args(turn)}}, nil
}

// Tool is the refund's body: its arguments and a refund id.
func Tool(_ context.Context, _, args string) (json.RawMessage, error) {
	var v map[string]any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return nil, err
	}
	v["refund_id"] = "rf-1"
	return json.Marshal(v)
}

// Turns runs turns turns and returns the model turns taken (turns+1).
func Turns(ctx wf.Context, turns int) (int, error) {
	return loop(ctx, turns, func(int, json.RawMessage) {})
}

// Held runs turns turns, keeping each tool result (what a hand-written
// loop keeps: the conversation's tool results), then waits for
// ReleaseSignal and returns the results kept; TurnsQuery answers the turns
// done so far.
func Held(ctx wf.Context, turns int) (int, error) {
	done := 0
	var results []json.RawMessage
	if err := wf.SetQueryHandler(ctx, TurnsQuery, func() (int, error) { return done, nil }); err != nil {
		return 0, err
	}
	if _, err := loop(ctx, turns, func(turn int, out json.RawMessage) {
		results = append(results, out)
		done = turn
	}); err != nil {
		return 0, err
	}
	wf.GetSignalChannel(ctx, ReleaseSignal).Receive(ctx, nil)
	return len(results), nil
}

// loop plays the turns, handing each tool result to got, and returns the
// model turns taken.
func loop(ctx wf.Context, turns int, got func(turn int, out json.RawMessage)) (int, error) {
	ao := wf.WithActivityOptions(ctx, wf.ActivityOptions{StartToCloseTimeout: time.Minute})
	for turn := 1; ; turn++ {
		var calls []threadstate.ToolCall
		if err := wf.ExecuteActivity(ao, ModelActivity, turn, turns).Get(ctx, &calls); err != nil {
			return 0, err
		}
		if len(calls) == 0 {
			return turn, nil
		}
		for _, c := range calls {
			var out json.RawMessage
			if err := wf.ExecuteActivity(ao, ToolActivity, c.Name, c.Arguments).Get(ctx, &out); err != nil {
				return 0, err
			}
			got(turn, out)
		}
	}
}
