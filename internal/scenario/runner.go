package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// Line is one trace line: a settled call of run Run (1-based).
type Line struct {
	Run int `json:"run"`
	agentrun.TraceLine
}

// RunStatus is a run's entry in the summary.
type RunStatus struct {
	Run        int    `json:"run"`
	WorkflowID string `json:"workflow_id"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
}

// Summary closes a trace.
type Summary struct {
	BodyInvocations map[string]int `json:"body_invocations"`
	Runs            []RunStatus    `json:"runs"`
}

// Runner plays a scenario's runs, one after another, on a worker that has
// the scenario's models (Scenario.Models(Prefix)).
type Runner struct {
	Client    client.Client
	TaskQueue string
	// Prefix keeps this invocation's threads and models apart from any
	// other's on the same server.
	Prefix string
	// OnLine receives each trace line as it is settled.
	OnLine func(Line)
	// Progress receives human-readable progress. Zero value: discarded.
	Progress io.Writer
}

// Run plays sc. A run that fails or stays interrupted does not stop the
// next ones; its status says what happened.
func (r *Runner) Run(ctx context.Context, sc *Scenario) ([]RunStatus, error) {
	progress := r.Progress
	if progress == nil {
		progress = io.Discard
	}
	var out []RunStatus
	for i, run := range sc.Runs {
		opts := runclient.RunOptions{
			TaskQueue: r.TaskQueue, Model: ModelName(r.Prefix, i), Agent: run.Agent, Hooks: run.Hooks,
			Message:    fmt.Sprintf("scenario run %d", i+1),
			WorkflowID: fmt.Sprintf("%s-run-%d", r.Prefix, i+1),
			// A script is played in full, however long.
			MaxTurns: max(agentrun.DefaultMaxTurns, run.TurnCount()+1),
		}
		if run.ThreadID != "" {
			opts.ThreadID = r.Prefix + "-" + run.ThreadID
		}
		fmt.Fprintf(progress, "run %d: starting %s\n", i+1, workflowIDOf(opts))
		st := RunStatus{Run: i + 1, WorkflowID: workflowIDOf(opts)}
		h, err := runclient.Start(ctx, r.Client, opts)
		if err != nil {
			var busy *runclient.ThreadBusyError
			if !errors.As(err, &busy) {
				return out, err
			}
			st.Status, st.Error = agentrun.StatusFailed, err.Error()
			out = append(out, st)
			continue
		}
		printed, skip, resumes := 0, "", run.Resumes
		for {
			res, err := runclient.Await(ctx, r.Client, h, skip)
			if res != nil && printed < res.TraceFrom+len(res.Trace) {
				// Lines other runs hold, or that leave large content out,
				// are read back whole.
				lines, terr := runclient.Trace(ctx, r.Client, h, res)
				if terr != nil {
					return out, terr
				}
				for _, l := range lines[printed:] {
					if r.OnLine != nil {
						r.OnLine(Line{Run: i + 1, TraceLine: l})
					}
				}
				printed = len(lines)
			}
			var failed *runclient.RunFailedError
			if errors.As(err, &failed) {
				st.Status, st.Error = agentrun.StatusFailed, failed.Error()
				break
			}
			if err != nil {
				return out, err
			}
			if res.Status != agentrun.StatusInterrupted {
				st.Status = res.Status
				break
			}
			if len(resumes) == 0 {
				st.Status = agentrun.StatusInterrupted
				fmt.Fprintf(progress, "run %d: interrupted (%s) with no resume left; the run stays open\n", i+1, res.Interrupt.ID)
				break
			}
			next := resumes[0]
			resumes = resumes[1:]
			fmt.Fprintf(progress, "run %d: resuming %s (perform_dangling=%v)\n", i+1, res.Interrupt.ID, next.PerformDangling)
			if _, err := runclient.Resume(ctx, r.Client, h.WorkflowID, agentrun.ResumeInput{
				InterruptID: res.Interrupt.ID, Answer: next.Answer, PerformDangling: next.PerformDangling}); err != nil {
				return out, fmt.Errorf("run %d: resume: %w", i+1, err)
			}
			skip = res.Interrupt.ID
		}
		fmt.Fprintf(progress, "run %d: %s\n", i+1, st.Status)
		out = append(out, st)
	}
	return out, nil
}

func workflowIDOf(o runclient.RunOptions) string {
	if o.ThreadID != "" {
		return o.ThreadID
	}
	return o.WorkflowID
}

// MarshalLine encodes a trace line as one JSON object, "run" first.
func MarshalLine(l Line) ([]byte, error) { return json.Marshal(l) }
