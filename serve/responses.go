package serve

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"go.temporal.io/api/serviceerror"
)

// The Responses API: POST /v1/responses starts a run on a thread (or
// continues an interrupted one: an approval answered, a client tool's
// results), GET /v1/responses/{id} reads a response back; and the
// response objects and their ids.

// inputError is a request's bad field, found after its run was read.
type inputError struct{ param, msg string }

func (e inputError) Error() string { return e.msg }

func (a *apiServer) createResponse(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if !a.decodeBody(w, r, &req) || !a.agentOf(w, req.Model) {
		return
	}
	if req.Store != nil && !*req.Store {
		badInput(w, "store", "store: false is not supported: a thread is stored by design (it is the durable conversation and its execution log)")
		return
	}
	truncation := "auto"
	if req.Truncation != nil {
		if t := *req.Truncation; t != "auto" && t != "disabled" {
			badInput(w, "truncation", `truncation is "auto" (compact a long thread's view) or "disabled"`)
			return
		}
		truncation = *req.Truncation
	}
	ctx, tenant := r.Context(), tenantOf(r.Context())
	var prev respID
	if req.PreviousResponseID != "" {
		var ok bool
		if prev, ok = a.ids.decode(idResponse, tenant, req.PreviousResponseID); !ok {
			notFound(w, "previous_response_id", req.PreviousResponseID)
			return
		}
	}
	in, param, msg := a.readInput(tenant, req.Input)
	if msg != "" {
		badInput(w, param, msg)
		return
	}
	tools, param, msg := a.clientTools(req.Tools, req.Metadata)
	if msg != "" {
		badInput(w, param, msg)
		return
	}
	params, param, msg := modelParams(req.Temperature, req.TopP, req.MaxOutputTokens)
	if msg != "" {
		badInput(w, param, msg)
		return
	}
	if in.approval == nil && len(in.results) == 0 && strings.TrimSpace(in.message) == "" {
		badInput(w, "input", "input holds no new user message")
		return
	}
	key, param, msg := idempotencyKey(r)
	if msg != "" {
		badInput(w, param, msg)
		return
	}
	wait, param, msg := a.clientWait(req.Metadata)
	if msg != "" {
		badInput(w, param, msg)
		return
	}
	// Every refusal comes before the run starts: a streamed response takes
	// its stream slot first.
	release, ok := a.streamSlot(w, req.Stream)
	if !ok {
		return
	}
	defer release()
	var id respID
	var run *agent.Run
	var err error
	if len(in.results) > 0 && strings.TrimSpace(in.message) != "" {
		// Tool outputs, then a new message (a framework loop that stopped
		// after its tool ran, the AI SDK's default, sends its next turn
		// so): the outputs answer the held calls, when they are still
		// held, and the run answers; then the message starts the next.
		if req.PreviousResponseID != "" && (prev.Thread != in.target.Thread || prev.Run != in.target.Run) {
			badInput(w, "previous_response_id", "the function_call_output items answer calls of another response than previous_response_id")
			return
		}
		if run, next, err := a.answer(ctx, tenant, *in.target, turnInput{results: in.results}); err == nil {
			if res, err := run.Await(ctx); err == nil && res != nil && res.Status == agent.Interrupted {
				// The run stopped again (an approval, new client calls):
				// that is the response, and the message waits for it.
				meta := a.meta(tenant, next, req.Model, req.PreviousResponseID)
				meta.clientTools = res.ClientTools
				writeJSONBounded(w, a.limits.write, http.StatusOK, a.responseObject(meta, res, nil))
				return
			}
		}
		if in.continues == nil {
			in.continues = &respID{Thread: in.target.Thread, Run: in.target.Run}
		}
		in.results, in.target = nil, nil
	}
	if in.approval != nil || len(in.results) > 0 {
		target := in.target
		if target == nil {
			if req.PreviousResponseID == "" {
				badInput(w, "previous_response_id", "an approval answer continues the response that asked it: give previous_response_id")
				return
			}
			target = &prev
		} else if req.PreviousResponseID != "" && (prev.Thread != target.Thread || prev.Run != target.Run) {
			badInput(w, "previous_response_id", "the function_call_output items answer calls of another response than previous_response_id")
			return
		}
		run, id, err = a.answer(ctx, tenant, *target, in)
	} else {
		thread := prev.Thread
		switch {
		case req.PreviousResponseID != "":
		case in.continues != nil:
			// The input resends the conversation (as frameworks do for
			// multi-turn): it continues the thread its last answer names,
			// when that answer is the thread's last.
			if !a.refuseUnlessLast(w, ctx, tenant, *in.continues, "input") {
				return
			}
			thread = in.continues.Thread
		case in.earlier:
			badInput(w, "input", "the input resends earlier turns, but none of its items is one this server returned to you, so no thread is known to continue: "+
				"continue with previous_response_id, or resend the earlier output items with their ids (docs/serve.md, \"Multi-turn\")")
			return
		case key != "":
			thread = a.keyedThread(tenant, key)
		default:
			thread = newResponsesThread()
		}
		rr := runRequest{agent: req.Model, message: in.message,
			instructions: instructionsOf(req.Instructions, req.Input), params: params, tools: tools, clientWait: wait, stream: req.Stream,
			noCompaction: truncation == "disabled"}
		if key != "" && req.PreviousResponseID == "" && in.continues == nil {
			run, err = a.startOnce(ctx, tenant, thread, rr)
		} else {
			run, err = a.start(ctx, tenant, thread, rr)
		}
		if err == nil {
			id = respID{Thread: thread, Run: run.RunID()}
		}
	}
	var ie inputError
	switch {
	case errors.As(err, &ie):
		badInput(w, ie.param, ie.msg)
		return
	case err != nil:
		runError(w, err, "previous_response_id")
		return
	}
	meta := a.meta(tenant, id, req.Model, req.PreviousResponseID)
	meta.truncation = truncation
	for _, t := range tools {
		meta.clientTools = append(meta.clientTools, t.Name)
	}
	if req.Stream && a.failedAtStart(w, ctx, run, tools) {
		return
	}
	if req.Stream {
		a.streamResponse(w, r, run, meta, -1)
		return
	}
	res, err := a.await(r, run)
	if res == nil || err != nil {
		runError(w, err, "previous_response_id")
		return
	}
	writeJSONBounded(w, a.limits.write, http.StatusOK, a.responseObject(meta, res, nil))
}

func (a *apiServer) getResponse(w http.ResponseWriter, r *http.Request) {
	tenant := tenantOf(r.Context())
	id, ok := a.ids.decode(idResponse, tenant, r.PathValue("id"))
	if !ok {
		notFound(w, "response_id", r.PathValue("id"))
		return
	}
	run := agent.Attach(a.c, id.Thread.workflowID(tenant), id.Run)
	res, err := run.State(r.Context())
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		notFound(w, "response_id", r.PathValue("id")) // its run is gone (retention, or deleted)
		return
	case err != nil:
		// The id is this server's, so the response exists: its run could
		// not be read now (its worker lost a moment ago, the server busy).
		unavailable(w)
		return
	}
	meta := a.meta(tenant, id, res.Agent, "")
	meta.clientTools = res.ClientTools
	// stream=true in the query (the Responses API), or in a JSON body
	// (openai-go's GetStreaming sends it so).
	var body struct {
		Stream bool `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	if q := r.URL.Query(); q.Get("stream") == "true" || body.Stream {
		after := int64(-1)
		if v := q.Get("starting_after"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				badInput(w, "starting_after", "starting_after is a sequence number")
				return
			}
			after = n
		}
		release, ok := a.acquireStream(w)
		if !ok {
			return
		}
		defer release()
		a.streamResponse(w, r, run, meta, after)
		return
	}
	var runErr error
	if res.Status == agent.Failed {
		runErr = errorString(res.Error)
	}
	writeJSONBounded(w, a.limits.write, http.StatusOK, a.responseObject(meta, res, runErr))
}

// respMeta is what a response object says besides the run's state.
type respMeta struct {
	id          respID
	sid         string // the response id
	tenant      string
	model       string
	prev        string
	created     int64
	clientTools []string // the run's client tools (their calls are the client's)
	truncation  string   // the request's ("auto" unless it said "disabled")
}

func (a *apiServer) meta(tenant string, id respID, model, prev string) respMeta {
	return respMeta{id: id, sid: a.ids.encode(idResponse, tenant, id), tenant: tenant, model: model, prev: prev, created: time.Now().Unix()}
}

// messageID is the id of the message item of the run's answer in turn
// (attempt: the model asked again within the turn, when not 0):
// authenticated, naming its run, so a client that resends it continues
// the thread.
func (a *apiServer) messageID(m respMeta, turn, attempt int) string {
	id := respID{Thread: m.id.Thread, Run: m.id.Run, Call: strconv.Itoa(turn)}
	if attempt != 0 {
		id.Call += "." + strconv.Itoa(attempt)
	}
	return a.ids.encode(idMessage, m.tenant, id)
}

// approvalID is the id of an interrupt's mcp_approval_request:
// authenticated, naming its run and the interrupt, so that its answer
// needs no previous_response_id (frameworks resend the conversation).
func (a *apiServer) approvalID(m respMeta, interrupt string) string {
	return a.ids.encode(idApproval, m.tenant, respID{Thread: m.id.Thread, Run: m.id.Run, Call: interrupt})
}

// callID is a client tool call's id: authenticated, naming its run.
func (a *apiServer) callID(m respMeta, call string) string {
	id := m.id
	id.From, id.Lines, id.BaseIn, id.BaseOut, id.BaseCached, id.Call = 0, 0, 0, 0, 0, call
	return a.ids.encode(idCall, m.tenant, id)
}

// outputItems are a response's output items: the agent's calls the run
// made since the response began (mcp_call), then its answer, or what it
// waits for (client tool calls, an approval).
func (a *apiServer) outputItems(m respMeta, res *agent.Result) []any {
	out := []any{}
	approval := ""
	if res.Status == agent.Interrupted && res.Interrupt != nil && res.Interrupt.Hook != agentrun.ClientToolsHook {
		approval = res.Interrupt.ID
	}
	for i, l := range res.Trace {
		if int64(i) < m.id.Lines || isClientCall(res, l) {
			continue
		}
		ap := ""
		if l.Outcome == agent.Held && approval != "" {
			ap = a.approvalID(m, approval)
		}
		out = append(out, mcpCallItem(agent.CallItem{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Outcome: l.Outcome, ServedFrom: l.ServedFrom,
			Relation: l.Relation, Arguments: l.Arguments, Result: l.Result, Error: l.Error}, ap))
	}
	switch {
	case res.Status == agent.Completed && res.Answer != "":
		out = append(out, messageItem(a.messageID(m, res.Turns, 0), res.Answer, "completed"))
	case res.Status == agent.Interrupted && res.Interrupt != nil && res.Interrupt.Hook == agentrun.ClientToolsHook:
		for _, c := range res.Interrupt.Held {
			out = append(out, functionCallItem(a.callID(m, c.ID), c.Name, c.Arguments))
		}
	case res.Status == agent.Interrupted && res.Interrupt != nil:
		out = append(out, approvalItem(a.approvalID(m, res.Interrupt.ID), res.Interrupt))
	}
	return out
}

// responseObject is the Responses API object of a run's state.
func (a *apiServer) responseObject(m respMeta, res *agent.Result, runErr error) map[string]any {
	obj := map[string]any{"id": m.sid, "object": "response", "created_at": m.created, "model": m.model,
		"previous_response_id": nil, "error": nil, "incomplete_details": nil, "instructions": nil,
		"metadata":            map[string]any{"tulip_thread": m.id.Thread.workflowID(m.tenant), "tulip_run": m.id.Run},
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "temperature": nil, "top_p": nil,
		"usage": nil, "text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": cmp.Or(m.truncation, "auto")}
	if m.prev != "" {
		obj["previous_response_id"] = m.prev
	}
	switch res.Status {
	case agent.Completed:
		obj["status"] = "completed"
	case agent.Interrupted:
		// The client's turn: its tools' calls, or an approval request, are
		// the output (OpenAI answers an mcp_approval_request so, and the
		// Agents SDK takes nothing else).
		obj["status"] = "completed"
		if res.Interrupt != nil && res.Interrupt.Hook != agentrun.ClientToolsHook {
			obj["metadata"].(map[string]any)["tulip_interrupt"] = res.Interrupt.ID
		}
	case agent.Failed:
		obj["status"] = "failed"
		msg := res.Error
		if runErr != nil {
			msg = runErr.Error()
		}
		obj["error"] = map[string]any{"code": "server_error", "message": msg}
	default:
		obj["status"] = "in_progress"
	}
	if runErr != nil && res.Status != agent.Failed {
		obj["status"] = "failed"
		obj["error"] = map[string]any{"code": "server_error", "message": runErr.Error()}
	}
	if res.Status != agent.Running {
		obj["usage"] = responseTokens(m, res).responsesUsage()
	}
	if len(res.Compactions) > 0 {
		// tulip's extension: the thread's model view was compacted
		// during this response (docs/context.md).
		obj["tulip"] = map[string]any{"compactions": res.Compactions}
	}
	obj["output"] = a.outputItems(m, res)
	return obj
}

// responseTokens are the tokens the run's model calls took since the
// response began.
func responseTokens(m respMeta, res *agent.Result) tokens {
	in, out, cached := runTokens(res)
	return tokens{in: max(0, in-m.id.BaseIn), out: max(0, out-m.id.BaseOut), cached: max(0, cached-m.id.BaseCached)}
}

// runTokens are a run's token counts so far.
func runTokens(res *agent.Result) (in, out, cached int64) {
	if res == nil || res.Usage == nil {
		return 0, 0, 0
	}
	return int64(res.Usage.PromptTokens), int64(res.Usage.CompletionTokens), int64(res.Usage.CachedTokens)
}

// isClientCall: the trace line is a call of one of the run's client tools.
func isClientCall(res *agent.Result, l agent.TraceLine) bool {
	return slices.Contains(res.ClientTools, l.Tool)
}

type errorString string

func (e errorString) Error() string { return string(e) }
