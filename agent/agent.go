// Package agent is tulip's client: start an agent run, wait for its
// answer or its interrupt, resume it, and read its trace, its execution
// log and its thread.
//
//	run, err := agent.Start(ctx, c, agent.Options{TaskQueue: "tulip", Model: "gpt",
//		ThreadID: "case-4821", Message: "refund order ORD-1"})
//	res, err := run.Await(ctx) // completed, failed or interrupted; its trace whole
//	if res.Interrupt != nil {
//		_, err = run.Resume(ctx, agent.Approve(res.Interrupt.ID))
//		res, err = run.Await(ctx) // the next interrupt, or the answer
//	}
//
// Everything here goes through the Temporal client's public API (start,
// describe, query, update, signal), so any client that speaks Temporal's
// API can do the same (docs/protocol.md).
package agent

import (
	"context"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// Options start an agent run.
type Options struct {
	// TaskQueue of the workers running tulip. Required.
	TaskQueue string
	// Model names a model registered on the workers (tulip.Options.Models).
	// Required.
	Model string
	// Agent names the agent: each agent on a thread has its own execution
	// log. Zero value: the agent named "support" (the name runs without
	// one have always had, so their threads keep their logs).
	Agent string
	// ThreadID, when set, is the run's workflow ID: the run continues the
	// thread (its conversation and its execution log are there before its
	// first call), and a second run on an open thread is refused with kind
	// tulip.ThreadBusy. Zero value: a run of its own.
	ThreadID string
	// WorkflowID of a run without a thread. Zero value: "tulip-run-" and a
	// random suffix.
	WorkflowID string
	// Message is the user's message.
	Message string
	// Hooks installed at start, by name (tulip.Options.Hooks), in order.
	Hooks []string
	// Tools names the worker's tools the agent is offered on this run:
	// tool names and toolset names (every tool of that toolset). A name
	// the worker does not have fails the run at its start (kind
	// tulip.BadInput). Zero value: every tool of the worker (a sub-agent
	// is never offered itself).
	Tools []string
	// NoCompaction: the run never compacts its model's view of the
	// conversation (docs/context.md); a call over the model's budget fails
	// the run with kind tulip.ContextTooLong. Zero value: a run compacts
	// as its worker's budgets say (tulip.Options.ContextTokens).
	NoCompaction bool
	// MaxTurns bounds the model responses. Zero value: 32.
	MaxTurns int
	// MaxArgumentBytes and MaxArgumentDepth bound a call's argument text;
	// a call over them is rejected. Zero values: 256 KiB and 64 levels.
	MaxArgumentBytes, MaxArgumentDepth int
	// SequentialCalls runs the calls of one model response one after
	// another. Zero value: at once.
	SequentialCalls bool
	// ContinueAfterTurns continues the run as new after this many model
	// turns (it also does when Temporal suggests it). Zero value: 250.
	ContinueAfterTurns int
	// ContinueAfterBytes continues the run as new once its history is this
	// large. Zero value: 8 MiB.
	ContinueAfterBytes int
	// Stream chooses what the run streams live (docs/protocol.md). Zero
	// value: every decision, and each answer once the model returns.
	Stream *StreamOptions
	// ExecutionTimeout bounds the whole run. Zero value: none.
	ExecutionTimeout time.Duration
	// TaskTimeout bounds one workflow task (how soon a task lost with its
	// worker is retried). Zero value: Temporal's 10 s.
	TaskTimeout time.Duration
	// Instructions are given to the model with every request of the run
	// (tulip.ModelRequest.Instructions: after the model's own system
	// prompt). Zero value: none.
	Instructions string
	// Params are the run's sampling parameters (temperature, top_p, the
	// answer's token bound), each sent when set. Zero value: the model's.
	Params *tulip.ModelParams
	// ClientTools are tools the caller runs, not the worker (their Name,
	// Description, Parameters and Idempotent count): offered to the model
	// with the worker's. A call the log does not serve interrupts the run
	// (Interrupt.Hook ClientToolsHook, the calls in Held) until
	// ClientResults answers it; an idempotent one's identical repeat is
	// served from the log. A name a worker tool has fails the run
	// (tulip.BadInput).
	ClientTools []tulip.ToolSpec
	// ClientTimeout bounds how long the run waits for its client tools'
	// results: past it, the held calls are answered as not performed
	// (TraceLine outcome Dropped, never recorded) and the run goes on to
	// its answer, so a caller that stops after one step leaves no thread
	// waiting. Zero value: the run waits until answered.
	ClientTimeout time.Duration
	// ForkOf, when set, makes the run a fork of that thread
	// (docs/forks.md) on ThreadID, a new thread: it starts from the
	// conversation and log before ForkOf's model response ForkAt (zero
	// value: 1, the first), with Message added when set. A call equal to
	// one the origin made from there on is served from the origin's
	// record (TraceLine.Relation "origin") and no body runs; a call the
	// origin never made interrupts the run (Interrupt.Hook "tulip.fork"),
	// unless ForkLive, which runs it.
	ForkOf   string
	ForkAt   int
	ForkLive bool
}

// StreamOptions choose what a run streams live (docs/protocol.md, "Live
// runs"). The zero value streams every decision, and each answer whole
// once the model returns.
type StreamOptions struct {
	// Off turns the stream off: no handlers, no items.
	Off bool `json:"off,omitempty"`
	// Text streams the model's answer as it is generated (pieces sent by
	// the model activity by signal: one history event per batch). Zero:
	// off.
	Text bool `json:"text,omitempty"`
	// BatchMillis is the interval of those batches. Zero: 300.
	BatchMillis int `json:"batch_ms,omitempty"`
	// Content adds each call's arguments and result (or error) to its
	// CallItem, each up to 64 KiB. Zero: off (items carry no arguments or
	// results).
	Content bool `json:"content,omitempty"`
}

// Run is a handle on a started run. A run that continues as new keeps its
// handle: every method follows the chain to its newest run. A Run is safe
// for use by one goroutine at a time.
type Run struct {
	c        client.Client
	h        runclient.Handle
	answered string // the interrupt this handle last resumed
}

// Start starts an agent run and returns its handle at once.
func Start(ctx context.Context, c client.Client, opts Options) (*Run, error) {
	ro := opts.runOptions()
	if opts.ForkOf != "" {
		if opts.ThreadID == "" {
			return nil, &runclient.OptionError{Field: "ThreadID"}
		}
		at := max(opts.ForkAt, 1)
		f, err := runclient.Fork(ctx, c, opts.ForkOf, opts.Agent, at, opts.ForkLive)
		if err != nil {
			return nil, err
		}
		ro.Fork = f
	}
	h, err := runclient.Start(ctx, c, ro)
	if err != nil {
		return nil, publicError(err)
	}
	return &Run{c: c, h: h}, nil
}

// runOptions are opts as the internal client takes them.
func (opts Options) runOptions() runclient.RunOptions {
	return runclient.RunOptions{TaskQueue: opts.TaskQueue, Model: opts.Model,
		Agent: opts.Agent, ThreadID: opts.ThreadID, WorkflowID: opts.WorkflowID, Message: opts.Message,
		Hooks: opts.Hooks, Tools: opts.Tools, NoCompaction: opts.NoCompaction, MaxTurns: opts.MaxTurns,
		Limits:          dedup.Limits{MaxBytes: opts.MaxArgumentBytes, MaxDepth: opts.MaxArgumentDepth},
		SequentialCalls: opts.SequentialCalls, ContinueAfterTurns: opts.ContinueAfterTurns,
		ContinueAfterBytes: opts.ContinueAfterBytes, Stream: (*agentrun.StreamOptions)(opts.Stream),
		WorkflowExecutionTimeout: opts.ExecutionTimeout, WorkflowTaskTimeout: opts.TaskTimeout,
		Instructions: opts.Instructions, Params: (*protocol.ModelParams)(opts.Params), ClientTools: clientTools(opts.ClientTools), ClientTimeout: opts.ClientTimeout}
}

// clientTools are specs as the run's input takes them.
func clientTools(specs []tulip.ToolSpec) []protocol.ToolSpec {
	if specs == nil {
		return nil
	}
	out := make([]protocol.ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = protocol.ToolSpec(s)
	}
	return out
}

// Attach returns a handle on a run started elsewhere: its workflow ID
// (the thread ID for a thread's run) and the run ID it started with, or ""
// for the workflow ID's newest run.
func Attach(c client.Client, workflowID, runID string) *Run {
	return &Run{c: c, h: runclient.Handle{WorkflowID: workflowID, RunID: runID}}
}

// ID is the run's workflow ID (its thread's ID, for a thread's run).
func (r *Run) ID() string { return r.h.WorkflowID }

// RunID is the Temporal run ID the run started with.
func (r *Run) RunID() string { return r.h.RunID }

// Await waits until the run completes, fails, or is interrupted by an
// interrupt this handle has not resumed. The result is whole: its Trace
// holds every line, also those earlier runs of a continued chain hold. A
// failed run returns its result, when it left one, and an error whose
// kind tulip.KindOf reads (tulip.MaxTurnsExceeded, tulip.ThreadLost, ...).
func (r *Run) Await(ctx context.Context) (*Result, error) {
	res, err := runclient.Await(ctx, r.c, r.h, r.answered)
	if res == nil {
		return nil, publicError(err)
	}
	if terr := r.whole(ctx, res); terr != nil && err == nil {
		return nil, terr
	}
	out, cerr := result(res)
	if cerr != nil {
		return nil, cerr
	}
	return out, publicError(err)
}

// State returns the run's state so far (a running run's too), its trace
// whole.
func (r *Run) State(ctx context.Context) (*Result, error) {
	res, err := runclient.State(ctx, r.c, r.h)
	if err != nil {
		return nil, publicError(err)
	}
	if err := r.whole(ctx, res); err != nil {
		return nil, err
	}
	return result(res)
}

// whole resolves res's trace: the lines earlier runs of the chain hold.
func (r *Run) whole(ctx context.Context, res *agentrun.RunResult) error {
	if res.TraceFrom == 0 && len(res.TraceParts) == 0 {
		return nil
	}
	lines, err := runclient.Trace(ctx, r.c, r.h, res)
	if err != nil {
		return err
	}
	res.Trace, res.TraceFrom, res.TraceParts = lines, 0, nil
	return nil
}

// Resume answers the run's interrupt, by update: it returns once the run
// has taken it. A resume of a run that is closed, or not interrupted,
// fails (kind tulip.NotInterrupted; tulip.StaleInterrupt for an interrupt
// that is not the current one); the same resume delivered twice takes
// effect once (ResumeResult.Duplicate). The resume goes to this handle's
// run: when its thread has gone on to a later run, it fails
// (tulip.NotInterrupted). After it, Await waits for the run's next
// interrupt or its answer.
func (r *Run) Resume(ctx context.Context, in ResumeInput) (ResumeResult, error) {
	rin, err := recode[agentrun.ResumeInput](in)
	if err != nil {
		return ResumeResult{}, err
	}
	out, err := runclient.ResumeRun(ctx, r.c, r.h, rin)
	if err != nil {
		return ResumeResult{}, publicError(err)
	}
	r.answered = out.InterruptID
	return ResumeResult{InterruptID: out.InterruptID, Duplicate: out.Duplicate}, nil
}

// ResumeBySignal sends the resume as a signal, for callers that cannot
// send updates. It must name its interrupt; a run drops an invalid one
// (a signal cannot answer), so prefer Resume.
func (r *Run) ResumeBySignal(ctx context.Context, in ResumeInput) error {
	rin, err := recode[agentrun.ResumeInput](in)
	if err != nil {
		return err
	}
	if err := runclient.ResumeBySignal(ctx, r.c, r.h.WorkflowID, rin); err != nil {
		return publicError(err)
	}
	r.answered = in.InterruptID
	return nil
}

// Log returns the run's execution log (open or closed), every record in
// full.
func (r *Run) Log(ctx context.Context) ([]Record, error) {
	recs, err := runclient.Log(ctx, r.c, r.h)
	if err != nil {
		return nil, publicError(err)
	}
	return recode[[]Record](recs)
}

// Trace returns the run's trace lines, whole: one per settled call, with
// its outcome (executed, served, cancelled, ...).
func (r *Run) Trace(ctx context.Context) ([]TraceLine, error) {
	res, err := r.State(ctx)
	if err != nil {
		return nil, err
	}
	return res.Trace, nil
}

// Thread returns a thread's state: its conversation and every agent's
// execution log, as the thread's next run would load it (the open run's,
// while one is open).
func Thread(ctx context.Context, c client.Client, threadID string) (*tulip.ThreadState, error) {
	cp, err := runclient.Thread(ctx, c, threadID)
	if err != nil {
		return nil, publicError(err)
	}
	return state(cp), nil
}

// ThreadLog returns the execution log an agent ("" for the default one)
// left on a thread.
func ThreadLog(ctx context.Context, c client.Client, threadID, agentName string) ([]Record, error) {
	recs, err := runclient.ThreadLog(ctx, c, threadID, agentName)
	if err != nil {
		return nil, publicError(err)
	}
	return recode[[]Record](recs)
}

// Approve answers interrupt id: the held calls run, the interrupted one
// with exactly the arguments it was held with.
func Approve(id string) ResumeInput {
	return ResumeInput{InterruptID: id, Answer: "approved", PerformDangling: true}
}

// Decline answers interrupt id: the held calls do not run (the trace
// shows each "dropped", Dropped; nothing is recorded in the log), and the
// model is told answer.
func Decline(id, answer string) ResumeInput {
	return ResumeInput{InterruptID: id, Answer: answer}
}

// ClientResults answers interrupt id of ClientToolsHook with the client
// tools' results, one for each held call: each is recorded as its call's
// outcome and given to the model, and the run goes on.
func ClientResults(id string, results ...ToolResult) ResumeInput {
	return ResumeInput{InterruptID: id, Results: results}
}

// SaveHistory writes the histories of workflowID's newest run (a thread's
// last run) and the runs it continued as new from, oldest first, as JSON
// files for tulip.ReplayHistories: file itself for one run, FILE-1.json,
// FILE-2.json, ... for a chain. Payloads are written as the server stores
// them (encrypted ones stay encrypted: give ReplayOptions.Keys). It
// returns the files written. 'tulip history' does the same from a shell.
func SaveHistory(ctx context.Context, c client.Client, workflowID, file string) ([]string, error) {
	var hists []*historypb.History // oldest first
	for run := ""; ; {
		hist, err := runclient.FetchHistory(ctx, c, workflowID, run)
		if err != nil {
			return nil, publicError(err)
		}
		hists = append([]*historypb.History{hist}, hists...)
		if run = runclient.ContinuedFrom(hist); run == "" {
			break
		}
	}
	names := runclient.HistoryFiles(file, len(hists))
	for i, hist := range hists {
		if err := runclient.WriteHistory(names[i], hist); err != nil {
			return nil, err
		}
	}
	return names, nil
}
