package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// Starting and answering runs: one start a thread at a time, an
// idempotency key's retry reaching its first run, an answer reaching its
// run once.

// runRequest is a run a request starts: its thread and what it sends.
type runRequest struct {
	agent, message, instructions string
	params                       *protocol.ModelParams
	tools                        []protocol.ToolSpec
	clientWait                   time.Duration // 0: the server's
	// once: a keyed request's start, which reaches the run its first try
	// started instead of starting another.
	once bool
	// stream: the response is streamed, so the run streams its text (in
	// pieces of textBatch); an unstreamed one's text adds no history.
	stream bool
	// noCompaction: the request's truncation is "disabled".
	noCompaction bool
}

// textBatch is how often a streamed answer's text is sent to its run's
// history (one signal each): about one event a second of text.
const textBatch = 1000

// clientWait reads a request's metadata tulip_client_timeout (a duration,
// "90s"): how long its run waits for client tools' results, at most the
// server's --client-timeout.
func (a *apiServer) clientWait(metadata map[string]any) (time.Duration, string, string) {
	v, ok := metadata["tulip_client_timeout"]
	if !ok {
		return 0, "", ""
	}
	s, _ := v.(string)
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, "metadata.tulip_client_timeout", "tulip_client_timeout is a positive duration, such as \"90s\""
	}
	return min(d, a.limits.clientWait), "", ""
}

// start starts a run on thread: one at a time on a thread (this server's
// lock; the Temporal server's start conflict decides between servers).
func (a *apiServer) start(ctx context.Context, tenant string, thread threadName, rr runRequest) (*agent.Run, error) {
	wfID := thread.workflowID(tenant)
	unlock := a.lockThread(wfID)
	defer unlock()
	if rr.once {
		// A keyed request: the run its first try started, if there is one.
		if run, err := a.existing(ctx, wfID); run != nil || err != nil {
			return run, err
		}
	}
	wait := rr.clientWait
	if wait == 0 {
		wait = a.limits.clientWait
	}
	if len(rr.tools) == 0 {
		wait = 0 // no client tools: nothing to wait for (and the input stays as before)
	}
	return agent.Start(ctx, a.c, agent.Options{TaskQueue: a.taskQueue, Model: a.model, Agent: rr.agent, ThreadID: wfID, ClientTimeout: wait,
		Message: rr.message, Hooks: a.hooks, MaxTurns: a.maxTurns, Stream: &agent.StreamOptions{Text: rr.stream, BatchMillis: textBatch, Content: true},
		Instructions: rr.instructions, Params: (*tulip.ModelParams)(rr.params), ClientTools: publicSpecs(rr.tools), NoCompaction: rr.noCompaction})
}

// answer resumes the run id names with an approval's answer or client
// tools' results; the response that follows covers the run from here.
func (a *apiServer) answer(ctx context.Context, tenant string, id respID, in turnInput) (*agent.Run, respID, error) {
	run := agent.Attach(a.c, id.Thread.workflowID(tenant), id.Run)
	state, err := run.State(ctx)
	if err != nil {
		return nil, respID{}, err
	}
	if in.approval != nil && in.target != nil && (state.Interrupt == nil || state.Interrupt.ID != in.interrupt) {
		// The approval's id is one this server made for this run: the
		// run no longer waits for it, so it was answered.
		return nil, respID{}, a.standing(ctx, run, in.interrupt)
	}
	if state.Status != agent.Interrupted || state.Interrupt == nil {
		return nil, respID{}, &agent.NotInterruptedError{WorkflowID: run.ID()}
	}
	next := respID{Thread: id.Thread, Run: id.Run, Lines: int64(len(state.Trace))} // whole: the chain's every line
	next.BaseIn, next.BaseOut, next.BaseCached = runTokens(state)
	next.From = a.offset(ctx, run)
	var resume agent.ResumeInput
	switch {
	case in.approval != nil:
		if state.Interrupt.Hook == agentrun.ClientToolsHook {
			return nil, respID{}, inputError{"input", "the run waits for client tool results (function_call_output), not an approval"}
		}
		resume = agent.Approve(in.interrupt)
		if !*in.approval.Approve {
			reason := in.approval.Reason
			if reason == "" {
				reason = "declined"
			}
			resume = agent.Decline(in.interrupt, reason)
		}
	default:
		if state.Interrupt.Hook != agentrun.ClientToolsHook {
			return nil, respID{}, inputError{"input", "the run waits for an approval (mcp_approval_response), not tool results"}
		}
		resume = agent.ResumeInput{InterruptID: state.Interrupt.ID}
		for _, r := range in.results {
			resume.Results = append(resume.Results, agent.ToolResult{CallID: r.call.Call, Output: r.output})
		}
	}
	out, err := run.Resume(ctx, resume)
	if err != nil {
		// Another answer came first (the run may have closed since):
		// when the interrupt is no longer open, that answer stands.
		if st, serr := run.State(ctx); serr == nil && (st.Interrupt == nil || st.Interrupt.ID != resume.InterruptID) {
			return nil, respID{}, a.standing(ctx, run, resume.InterruptID)
		}
		return nil, respID{}, err
	}
	if out.Duplicate {
		return nil, respID{}, a.standing(ctx, run, out.InterruptID)
	}
	return run, next, nil
}

// answeredError: an approval (or a client tool call) was answered already;
// the answer that stands is Outcome.
type answeredError struct{ interrupt, outcome string }

func (e *answeredError) Error() string {
	return fmt.Sprintf("interrupt %s was answered already (%s): a second answer changes nothing", e.interrupt, e.outcome)
}

// standing is the error for a second answer to interrupt: what the first
// answer did, read from the run's trace (its held calls performed or
// dropped).
func (a *apiServer) standing(ctx context.Context, run *agent.Run, interrupt string) error {
	outcome := "answered"
	if st, err := run.State(ctx); err == nil {
		for i := len(st.Trace) - 1; i >= 0; i-- {
			switch st.Trace[i].Outcome {
			case agent.Dangling:
				outcome = "approved: its calls ran"
			case agent.Dropped:
				outcome = "declined: its calls did not run"
			default:
				continue
			}
			break
		}
	}
	return &answeredError{interrupt: interrupt, outcome: outcome}
}

// lastOfThread checks that id, the response a resent conversation ends
// with, is its thread's last: a conversation resent from an earlier point
// (edited, or branched) cannot continue the thread.
func (a *apiServer) lastOfThread(ctx context.Context, tenant string, id respID) error {
	desc, err := a.c.DescribeWorkflowExecution(ctx, id.Thread.workflowID(tenant), "")
	if err != nil {
		return err
	}
	if desc.GetWorkflowExecutionInfo().GetFirstRunId() != id.Run {
		return inputError{"input", "the input resends a conversation that ends before its thread's last response (the thread went on since): " +
			"resend the whole conversation, or continue with previous_response_id"}
	}
	return nil
}

// refuseUnlessLast answers the refusal when id is not its thread's last
// response (lastOfThread), and reports whether the request may go on.
func (a *apiServer) refuseUnlessLast(w http.ResponseWriter, ctx context.Context, tenant string, id respID, param string) bool {
	err := a.lastOfThread(ctx, tenant, id)
	var ie inputError
	switch {
	case errors.As(err, &ie):
		badInput(w, param, ie.msg)
	case err != nil:
		runError(w, err, param)
	}
	return err == nil
}

// idempotencyKey reads a request's Idempotency-Key header: a retried
// request that starts a thread with the same key reaches the run the
// first one started instead of starting another.
func idempotencyKey(r *http.Request) (string, string, string) {
	key := strings.TrimSpace(r.Header.Get(IdempotencyHeader))
	if len(key) > 256 || strings.ContainsAny(key, "\x00\n\r") {
		return "", IdempotencyHeader, "an idempotency key is at most 256 characters on one line"
	}
	return key, "", ""
}

// keyedThread is the thread a request with an idempotency key starts: the
// same for the same tenant and key, on every server sharing the id key.
func (a *apiServer) keyedThread(tenant, key string) threadName {
	return threadName{Name: string(a.ids.mac("idempotency-key", tenant, []byte(key)))}
}

// startOnce starts a keyed request's run, or reaches the one its first
// try started.
func (a *apiServer) startOnce(ctx context.Context, tenant string, thread threadName, rr runRequest) (*agent.Run, error) {
	rr.once = true
	run, err := a.start(ctx, tenant, thread, rr)
	if tulip.Is(err, tulip.ThreadBusy) {
		// Another server started it between: the run is there now.
		if run, err := a.existing(ctx, thread.workflowID(tenant)); run != nil || err != nil {
			return run, err
		}
	}
	return run, err
}

// existing is the run a thread has, nil when it has none (the server
// says not found), or the error that kept it from saying.
func (a *apiServer) existing(ctx context.Context, wfID string) (*agent.Run, error) {
	desc, err := a.c.DescribeWorkflowExecution(ctx, wfID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return agent.Attach(a.c, wfID, desc.GetWorkflowExecutionInfo().GetFirstRunId()), nil
}

// await waits for the run's answer: until it is there, the client leaves,
// or the server's grace period after a shutdown ends.
func (a *apiServer) await(r *http.Request, run *agent.Run) (*agent.Result, error) {
	return run.Await(r.Context())
}

// offset is the run's stream offset now (0 when it cannot be read).
func (a *apiServer) offset(ctx context.Context, run *agent.Run) int64 {
	var end int64
	if v, err := a.c.QueryWorkflow(ctx, run.ID(), run.RunID(), streams.OffsetQuery); err == nil {
		_ = v.Get(&end)
	}
	return end
}

// failedAtStart: a run with client tools whose workers are elsewhere
// failed at its first task (a clash with their tools), answered as the 400
// it is, before a stream begins.
func (a *apiServer) failedAtStart(w http.ResponseWriter, ctx context.Context, run *agent.Run, tools []protocol.ToolSpec) bool {
	if len(tools) == 0 || len(a.toolNames) > 0 {
		return false
	}
	if res, err := a.firstTask(ctx, run); res != nil && res.Status == agent.Failed {
		runError(w, err, "tools")
		return true
	}
	return false
}

// firstTask waits (at most 5 s) until the run's first workflow task has
// completed, and returns the run's result when it ended there.
func (a *apiServer) firstTask(ctx context.Context, run *agent.Run) (*agent.Result, error) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		desc, err := a.c.DescribeWorkflowExecution(ctx, run.ID(), run.RunID())
		if err != nil {
			return nil, err
		}
		info := desc.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return run.Await(ctx)
		}
		if info.GetHistoryLength() > 3 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, nil
}

// publicSpecs are client tools' specs as agent.Options takes them.
func publicSpecs(specs []protocol.ToolSpec) []tulip.ToolSpec {
	if specs == nil {
		return nil
	}
	out := make([]tulip.ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = tulip.ToolSpec(s)
	}
	return out
}
