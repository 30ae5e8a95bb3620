package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Script is the script of thread t's run k (from 0): refunds and pages
// repeated within a response and across turns, a mint; unless the thread's
// runs start plainly (no hooks), every third run also asks to isolate a
// host, which the approval hook holds, and is resumed (performing the held
// call, then refunding again). Call ids are "t<t>k<k>-<letter>", unique in
// a soak. Every thread of a kind (plain or not) plays the same sequence of
// scripts, on its own order, case and host: one reference thread per kind
// says what each of them must do.
func Script(k, t int, plain bool) scenario.Run {
	refund := fmt.Sprintf(`{"order_id": "ord-%d", "amount": 10}`, t)
	refundAgain := fmt.Sprintf(`{"amount": 10, "order_id": "ord-%d"}`, t)
	page := fmt.Sprintf(`{"case_id": "case-%d", "summary": "refund"}`, t)
	id := func(s string) string { return fmt.Sprintf("t%dk%d-%s", t, k, s) }
	run := scenario.Run{Turns: []scenario.Turn{
		{ToolCalls: []threadstate.ToolCall{{ID: id("a"), Name: "issue_refund", Arguments: refund}, {ID: id("b"), Name: "issue_refund", Arguments: refundAgain}}},
		{ToolCalls: []threadstate.ToolCall{{ID: id("c"), Name: "page_oncall", Arguments: page}, {ID: id("d"), Name: "mint_case_id", Arguments: "{}"}}},
		{ToolCalls: []threadstate.ToolCall{{ID: id("e"), Name: "issue_refund", Arguments: refundAgain}, {ID: id("f"), Name: "page_oncall", Arguments: page}}},
	}}
	if !plain {
		run.Hooks = []string{"approve_isolate_host"}
	}
	if k%3 == 0 && !plain {
		run.Turns = append(run.Turns, scenario.Turn{ToolCalls: []threadstate.ToolCall{{ID: id("g"), Name: "isolate_host", Arguments: fmt.Sprintf(`{"host": "web-%d"}`, t)}}})
		run.Resumes = []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{
			{ToolCalls: []threadstate.ToolCall{{ID: id("h"), Name: "issue_refund", Arguments: refund}}}}}}
	}
	return run
}

// message is thread t's run k's user message; the model reads k, t and
// plain back.
func message(k, t int, plain bool) string {
	if plain {
		return fmt.Sprintf("soak run %d thread %d plain", k, t)
	}
	return fmt.Sprintf("soak run %d thread %d", k, t)
}

// Models are the soak's models: "soak" plays the script its run's message
// names, each answer after latency (a model takes its time; zero: none).
func Models(latency time.Duration) map[string]activities.Model {
	return map[string]activities.Model{"soak": activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if latency > 0 {
			sleep(ctx, latency)
		}
		for k := len(req.Messages) - 1; k >= 0; k-- {
			var i, t int
			if m := req.Messages[k]; m.Role == "user" {
				if n, _ := fmt.Sscanf(m.Content, "soak run %d thread %d", &i, &t); n == 2 {
					return Script(i, t, strings.HasSuffix(m.Content, " plain")).Model().Respond(ctx, req)
				}
			}
		}
		return activities.ModelResponse{}, errors.New("soak: no run message")
	})}
}

// parseCall reads a call id: its thread, its run on the thread, and the
// call's letter.
func parseCall(callID string) (t, k int, letter string, ok bool) {
	run, letter, found := strings.Cut(callID, "-")
	if n, _ := fmt.Sscanf(run, "t%dk%d", &t, &k); n != 2 || !found || fmt.Sprintf("t%dk%d", t, k) != run {
		return 0, 0, "", false
	}
	return t, k, letter, true
}

// runOf names the run a call id belongs to ("t3k5"), or "?".
func runOf(callID string) string {
	t, k, _, ok := parseCall(callID)
	if !ok {
		return "?"
	}
	return fmt.Sprintf("t%dk%d", t, k)
}

// sameCall is a call id with its thread left out: the call of the same
// script on every thread of a kind ("k5-a").
func sameCall(callID string) string {
	_, k, letter, ok := parseCall(callID)
	if !ok {
		return callID
	}
	return fmt.Sprintf("k%d-%s", k, letter)
}

// Run statuses beside workflow's: stuck (no end before the deadline) and
// nondeterministic (its task fails: the workers cannot replay it).
const (
	statusStuck            = "stuck"
	statusNondeterministic = "nondeterministic"
)

// run is one agent run of the soak: thread's k-th (from 0).
type run struct {
	k, thread  int
	plain      bool
	h          runclient.Handle
	status     string
	err        string
	turns      int
	start, end time.Time
}

// workload plays runs on a task queue.
type workload struct {
	c             client.Client
	dc            converter.DataConverter
	tq            string
	continueAfter int
	plainEvery    int
	// billing answers the holds of calls whose outcome is unknown (by
	// key, as a person would look a refund up).
	billing billing.Client

	mu     sync.Mutex
	prompt string // the instructions of the runs started from now on
}

func (w *workload) setPrompt(p string) {
	w.mu.Lock()
	w.prompt = p
	w.mu.Unlock()
}

func (w *workload) instructions() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.prompt
}

func (w *workload) threadID(t int) string { return fmt.Sprintf("%s-thread-%d", w.tq, t) }

// plain says whether thread t's runs start the plain way.
func (w *workload) plain(t int) bool { return w.plainEvery > 0 && t%w.plainEvery == w.plainEvery-1 }

func (w *workload) newRun(k, t int) *run { return &run{k: k, thread: t, plain: w.plain(t)} }

// play plays r to its end: starts it (again, while the server is away),
// resumes its interrupts (every fourth by signal, every sixth twice), and
// waits for it.
func (w *workload) play(ctx context.Context, r *run) {
	r.start = time.Now()
	defer func() { r.end = time.Now() }()
	if err := w.startRun(ctx, r); err != nil {
		r.status, r.err = statusStuck, err.Error()
		return
	}
	skip := ""
	for {
		res, err := runclient.Await(ctx, w.c, r.h, skip)
		if ctx.Err() != nil {
			r.status, r.err = statusStuck, "no end before the deadline"
			return
		}
		var failed *runclient.RunFailedError
		var nd *runclient.NondeterminismError
		if errors.As(err, &nd) {
			r.status, r.err = statusNondeterministic, nd.Error()
			return
		}
		if errors.As(err, &failed) {
			r.status, r.err = agentrun.StatusFailed, failed.Error()
			return
		}
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		r.turns = res.Turns
		if res.Status != agentrun.StatusInterrupted {
			r.status = res.Status
			return
		}
		in := agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true}
		if res.Interrupt.Hook == agentrun.UnknownHook {
			in = w.answerHold(ctx, res)
		}
		w.resume(ctx, r, in)
		skip = res.Interrupt.ID
	}
}

// answerHold answers the hold of a call whose outcome is unknown (res's
// interrupt) as a person would: billing is asked by the held call's key
// (its held line's, in the interrupt's turn); its receipt is the call's
// result, and with none the call runs again, with the same key. Billing's
// lookup failing (it never does in a soak) is asked again. A held line
// with no key, which cannot be, is declined: the call is not run again
// blind (its unknown error then differs from the reference's outcome,
// which the checker reports).
func (w *workload) answerHold(ctx context.Context, res *agentrun.RunResult) agentrun.ResumeInput {
	it := res.Interrupt
	id := it.Held[0].ID
	key := ""
	for _, l := range res.Trace {
		if l.CallID == id && l.Turn == it.Turn && l.Outcome == agentrun.OutcomeHeld {
			key = l.Key
		}
	}
	if key == "" {
		return agentrun.ResumeInput{InterruptID: it.ID, Answer: "soak: the held line names no key"}
	}
	for {
		rc, found, err := w.billing.Lookup(ctx, key)
		switch {
		case err == nil && found:
			out, _ := json.Marshal(rc)
			return agentrun.ResumeInput{InterruptID: it.ID, Results: []agentrun.ToolResult{{CallID: id, Output: string(out)}}}
		case err == nil:
			return agentrun.ResumeInput{InterruptID: it.ID, PerformDangling: true}
		}
		if sleep(ctx, 200*time.Millisecond); ctx.Err() != nil {
			return agentrun.ResumeInput{InterruptID: it.ID} // the run is stuck: resume sends nothing
		}
	}
}

func (w *workload) resume(ctx context.Context, r *run, in agentrun.ResumeInput) {
	for ctx.Err() == nil {
		var err error
		if r.k%4 == 0 {
			err = runclient.ResumeBySignal(ctx, w.c, r.h.WorkflowID, in)
		} else {
			_, err = runclient.Resume(ctx, w.c, r.h.WorkflowID, in)
		}
		if err == nil || resumed(err) {
			if r.k%6 == 0 {
				_, _ = runclient.Resume(ctx, w.c, r.h.WorkflowID, in) // again: a duplicate, refused or absorbed
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// resumed says whether a resume failed because the run is no longer
// interrupted by it: an earlier try whose answer was lost took effect.
func resumed(err error) bool {
	var closed *runclient.NotInterruptedError
	var app *temporal.ApplicationError
	return errors.As(err, &closed) ||
		(errors.As(err, &app) && (app.Type() == protocol.ErrNotInterrupted || app.Type() == protocol.ErrStaleInterrupt))
}

// startRun starts r, as runclient.Start does (hooks, previous_run_id, a 2 s
// workflow task timeout) or plainly, trying again while the server is
// away. A start whose answer was lost finds its run open: that run is
// adopted when it is r's.
func (w *workload) startRun(ctx context.Context, r *run) error {
	thread, msg := w.threadID(r.thread), message(r.k, r.thread, r.plain)
	var err error
	for ctx.Err() == nil {
		if r.plain {
			var wr client.WorkflowRun
			// The plain way: no previous_run_id, so the run's loader
			// waits out visibility lag; ExecuteWorkflow returns the
			// open run when the ID already runs.
			wr, err = w.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: thread, TaskQueue: w.tq}, agentrun.WorkflowName,
				agentrun.RunInput{ThreadID: thread, Model: "soak", Message: msg, Instructions: w.instructions()})
			if err == nil {
				r.h = runclient.Handle{WorkflowID: wr.GetID(), RunID: wr.GetRunID()}
			}
		} else {
			r.h, err = runclient.Start(ctx, w.c, runclient.RunOptions{TaskQueue: w.tq, Model: "soak", ThreadID: thread, Message: msg, Instructions: w.instructions(),
				Hooks: []string{"approve_isolate_host"}, WorkflowTaskTimeout: 2 * time.Second, ContinueAfterTurns: w.continueAfter})
			var busy *runclient.ThreadBusyError
			if errors.As(err, &busy) && w.ours(ctx, thread, busy.RunID, msg) {
				r.h, err = runclient.Handle{WorkflowID: thread, RunID: busy.RunID}, nil
			}
		}
		if err == nil {
			if r.plain && !w.ours(ctx, thread, r.h.RunID, msg) {
				return fmt.Errorf("thread %s: an earlier run is still open", thread)
			}
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not started: %v (last: %v)", ctx.Err(), err)
}

// ours says whether run runID of workflowID was started with msg.
func (w *workload) ours(ctx context.Context, workflowID, runID, msg string) bool {
	it := w.c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return false
	}
	ev, err := it.Next()
	if err != nil {
		return false
	}
	var in agentrun.RunInput
	p := ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
	if p == nil || w.dc.FromPayloads(p, &in) != nil {
		return false
	}
	return in.Message == msg
}

// playThreads plays runs, each thread's in order, threads at once, until
// next returns nil for every thread or ctx is done (Ctrl-C); each run
// ended goes to done.
func (w *workload) playThreads(ctx context.Context, threads int, next func(t int) *run, done func(*run)) {
	var wg sync.WaitGroup
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := next(t)
				if r == nil {
					return
				}
				w.play(ctx, r)
				done(r)
			}
		}()
	}
	wg.Wait()
}

// reference plays, for each kind of thread (plain: true or false) with
// runs, one thread's runs 0..n-1 alone, in order, with no fault, on w (an
// in-process worker's task queue), and returns each kind's final execution
// log. Every soak thread of that kind must have made a prefix of it.
func (w *workload) reference(ctx context.Context, threads int, runs map[bool]int, limit time.Duration) (map[bool][]Record, error) {
	out := map[bool][]Record{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for t := range threads {
		n, plain := runs[w.plain(t)], w.plain(t)
		if _, done := out[plain]; done || n == 0 {
			continue
		}
		out[plain] = nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, err := w.playAlone(ctx, t, n, limit)
			mu.Lock()
			out[plain], errs = recs, append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// playAlone plays thread t's runs 0..n-1 in order and returns its log.
func (w *workload) playAlone(ctx context.Context, t, n int, limit time.Duration) ([]Record, error) {
	for k := range n {
		r := w.newRun(k, t)
		rctx, cancel := context.WithTimeout(ctx, limit)
		w.play(rctx, r)
		cancel()
		if r.status != agentrun.StatusCompleted {
			return nil, fmt.Errorf("soak: the reference of run %d did not complete: %s %s", k, r.status, r.err)
		}
	}
	return threadLog(ctx, w.c, w.threadID(t), nil)
}
