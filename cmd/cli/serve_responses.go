package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// The Responses API: POST /v1/responses starts a run on a thread (or
// continues an interrupted one: an approval answered, a client tool's
// results), GET /v1/responses/{id} reads a response back.

// responsesRequest is the part of a Responses API request tulip reads;
// other fields are accepted and ignored (docs/serve.md, "Limits").
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	PreviousResponseID string            `json:"previous_response_id"`
	Stream             bool              `json:"stream"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Store              *bool             `json:"store"`
	Metadata           map[string]any    `json:"metadata"`
}

// inputItem is a Responses API input item: a message, an answer to an
// approval request (mcp_approval_response), a client tool's output
// (function_call_output), or an item a client sends back from an earlier
// response (function_call, mcp_call, reasoning, item_reference), which the
// thread holds already.
type inputItem struct {
	Type              string          `json:"type"`
	Role              string          `json:"role"`
	Content           json.RawMessage `json:"content"`
	ApprovalRequestID string          `json:"approval_request_id"`
	Approve           *bool           `json:"approve"`
	Reason            string          `json:"reason"`
	CallID            string          `json:"call_id"`
	Output            json.RawMessage `json:"output"`
}

// contentText reads a message's content: a string, or parts with text.
func contentText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "input_text" && p.Type != "text" && p.Type != "output_text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// turnInput is what a request asks of its thread: a new user message, an
// approval's answer, or client tools' results.
type turnInput struct {
	message  string
	approval *inputItem
	results  []clientResult
	// target is the run the results answer (from their call ids).
	target *respID
}

// clientResult is one client tool's output, for the call its id names.
type clientResult struct {
	call   respID // the authenticated call id, read
	output string
	param  string
}

// echoed are the item types a client sends back from earlier responses:
// the thread holds them already, so a request that answers its run (or
// adds a message) ignores them.
var echoed = []string{"function_call", "mcp_call", "mcp_approval_request", "mcp_list_tools", "reasoning", "item_reference"}

// readInput reads a request's input items: the new user message (the
// user messages after the last item the thread already holds), or an
// approval answer, or client tool outputs.
func (a *apiServer) readInput(tenant string, raw json.RawMessage) (turnInput, string, string) {
	var in turnInput
	var s string
	if len(raw) == 0 || string(raw) == "null" {
		return in, "input", "input is required"
	}
	if json.Unmarshal(raw, &s) == nil {
		in.message = s
		return in, "", ""
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return in, "input", "input is a string or a list of input items"
	}
	var users []string
	earlier := false // an item of an earlier turn came before the user messages
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch {
		case it.Type == "mcp_approval_response":
			if it.ApprovalRequestID == "" || it.Approve == nil {
				return in, param, "an mcp_approval_response needs approval_request_id and approve"
			}
			in.approval = &items[i]
		case it.Type == "function_call_output":
			call, ok := a.ids.decode(idCall, tenant, it.CallID)
			if !ok {
				return in, param + ".call_id", fmt.Sprintf("no tool call %q waits for a result here", it.CallID)
			}
			out, ok := outputOf(it.Output)
			if !ok {
				return in, param + ".output", "a function_call_output's output is a string or input_text parts"
			}
			if in.target != nil && (in.target.Thread != call.Thread || in.target.Run != call.Run) {
				return in, param + ".call_id", "the function_call_output items answer calls of different responses"
			}
			in.target = &call
			in.results = append(in.results, clientResult{call: call, output: out, param: param})
		case slices.Contains(echoed, it.Type):
			earlier, users = true, nil
		case it.Type == "message" || it.Type == "":
			switch it.Role {
			case "system", "developer":
				// Instructions: read with the request's (docs/serve.md).
			case "user":
				text, ok := contentText(it.Content)
				if !ok {
					return in, param + ".content", "a message's content is a string or input_text parts"
				}
				users = append(users, text)
			case "assistant":
				earlier, users = true, nil
			default:
				return in, param + ".role", fmt.Sprintf("role %q is not a message role (user, assistant, system, developer)", it.Role)
			}
		default:
			return in, param + ".type", fmt.Sprintf("input items of type %q are not supported (message, mcp_approval_response, function_call_output)", it.Type)
		}
	}
	switch {
	case in.approval != nil && len(in.results) > 0:
		return in, "input", "an approval answer and tool outputs go in separate requests"
	case (in.approval != nil || len(in.results) > 0) && len(users) > 0:
		return in, "input", "an approval answer or tool outputs and a new message go in separate requests"
	case len(users) > 1:
		return in, "input", "one new user message a request: the thread keeps the conversation (continue with previous_response_id)"
	case len(users) == 1:
		in.message = users[0]
	}
	_ = earlier
	return in, "", ""
}

// outputOf reads a function_call_output's output: a string, or text parts.
func outputOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", true
	}
	return contentText(raw)
}

// instructionsOf joins a request's instructions and its system and
// developer messages.
func instructionsOf(instructions *string, raw json.RawMessage) string {
	var parts []string
	if instructions != nil && strings.TrimSpace(*instructions) != "" {
		parts = append(parts, *instructions)
	}
	var items []inputItem
	if json.Unmarshal(raw, &items) == nil {
		for _, it := range items {
			if (it.Type == "message" || it.Type == "") && (it.Role == "system" || it.Role == "developer") {
				if text, ok := contentText(it.Content); ok && strings.TrimSpace(text) != "" {
					parts = append(parts, text)
				}
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

// clientTool is a function tool a request offers: the client runs it.
type clientTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Function holds the tool in Chat Completions' shape.
	Function *clientTool `json:"function"`
	// Tulip is tulip's extension: {"idempotent": true} serves an
	// identical repeat of the call from the log.
	Tulip *struct {
		Idempotent bool `json:"idempotent"`
	} `json:"tulip"`
}

// clientTools reads a request's tools: function tools only, no clash with
// the agent's own, idempotent when marked (the tool's tulip field, or the
// request's metadata tulip_idempotent_tools: names, comma-separated).
func (a *apiServer) clientTools(raw []json.RawMessage, metadata map[string]any) ([]activities.ToolSpec, string, string) {
	idem := map[string]bool{}
	if v, ok := metadata["tulip_idempotent_tools"].(string); ok {
		for _, n := range strings.Split(v, ",") {
			idem[strings.TrimSpace(n)] = true
		}
	}
	var specs []activities.ToolSpec
	for i, r := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		var t clientTool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, param, "a tool is an object: " + err.Error()
		}
		if t.Type != "function" {
			return nil, param + ".type", fmt.Sprintf("tools of type %q are not supported: the agent's own tools run on the server; a client offers function tools", t.Type)
		}
		if t.Function != nil { // Chat Completions
			t.Name, t.Description, t.Parameters = t.Function.Name, t.Function.Description, t.Function.Parameters
			if t.Function.Tulip != nil {
				t.Tulip = t.Function.Tulip
			}
		}
		if t.Name == "" {
			return nil, param + ".name", "a function tool needs a name"
		}
		if slices.Contains(a.toolNames, t.Name) {
			return nil, param + ".name", fmt.Sprintf("the tool %q is the agent's own (it runs on the server): give the client's tool another name", t.Name)
		}
		if slices.ContainsFunc(specs, func(s activities.ToolSpec) bool { return s.Name == t.Name }) {
			return nil, param + ".name", fmt.Sprintf("the tool %q is offered twice", t.Name)
		}
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		specs = append(specs, activities.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params,
			Idempotent: idem[t.Name] || (t.Tulip != nil && t.Tulip.Idempotent)})
	}
	return specs, "", ""
}

// modelParams are a request's model parameters (nil when none is set).
func modelParams(temperature, topP *float64, maxTokens *int) (*activities.ModelParams, string, string) {
	if temperature == nil && topP == nil && maxTokens == nil {
		return nil, "", ""
	}
	if temperature != nil && (*temperature < 0 || *temperature > 2) {
		return nil, "temperature", "temperature is between 0 and 2"
	}
	if topP != nil && (*topP < 0 || *topP > 1) {
		return nil, "top_p", "top_p is between 0 and 1"
	}
	if maxTokens != nil && *maxTokens < 1 {
		return nil, "max_output_tokens", "max_output_tokens is at least 1"
	}
	return &activities.ModelParams{Temperature: temperature, TopP: topP, MaxOutputTokens: maxTokens}, "", ""
}

// runRequest is a run a request starts: its thread and what it sends.
type runRequest struct {
	agent, message, instructions string
	params                       *activities.ModelParams
	tools                        []activities.ToolSpec
}

// start starts a run on thread: one at a time on a thread (this server's
// lock; the Temporal server's start conflict decides between servers).
func (a *apiServer) start(ctx context.Context, tenant string, thread threadName, rr runRequest) (*agent.Run, error) {
	wfID := thread.workflowID(tenant)
	unlock := a.lockThread(wfID)
	defer unlock()
	return agent.Start(ctx, a.c, agent.Options{TaskQueue: a.taskQueue, Model: chatModel, Agent: rr.agent, ThreadID: wfID,
		Message: rr.message, Hooks: a.hooks, MaxTurns: a.maxTurns, Stream: &agent.StreamOptions{Text: true, Content: true},
		Instructions: rr.instructions, Params: (*tulip.ModelParams)(rr.params), ClientTools: publicSpecs(rr.tools)})
}

// answer resumes the run id names with an approval's answer or client
// tools' results; the response that follows covers the run from here.
func (a *apiServer) answer(ctx context.Context, tenant string, id respID, in turnInput) (*agent.Run, respID, error) {
	run := agent.Attach(a.c, id.Thread.workflowID(tenant), id.Run)
	state, err := run.State(ctx)
	if err != nil {
		return nil, respID{}, err
	}
	if state.Status != agent.Interrupted || state.Interrupt == nil {
		return nil, respID{}, &agent.NotInterruptedError{WorkflowID: run.ID()}
	}
	next := respID{Thread: id.Thread, Run: id.Run, Lines: int64(len(state.Trace))} // whole: the chain's every line
	next.BaseIn, next.BaseOut, _ = runTokens(state)
	next.From = a.offset(ctx, run)
	var resume agent.ResumeInput
	switch {
	case in.approval != nil:
		if state.Interrupt.Hook == agentrun.ClientToolsHook {
			return nil, respID{}, inputError{"input", "the run waits for client tool results (function_call_output), not an approval"}
		}
		resume = agent.Approve(in.approval.ApprovalRequestID)
		if !*in.approval.Approve {
			reason := in.approval.Reason
			if reason == "" {
				reason = "declined"
			}
			resume = agent.Decline(in.approval.ApprovalRequestID, reason)
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
	if _, err := run.Resume(ctx, resume); err != nil {
		return nil, respID{}, err
	}
	return run, next, nil
}

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
	var id respID
	var run *agent.Run
	var err error
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
		if req.PreviousResponseID == "" {
			thread = newResponsesThread()
		}
		run, err = a.start(ctx, tenant, thread, runRequest{agent: req.Model, message: in.message,
			instructions: instructionsOf(req.Instructions, req.Input), params: params, tools: tools})
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

func (a *apiServer) getResponse(w http.ResponseWriter, r *http.Request) {
	tenant := tenantOf(r.Context())
	id, ok := a.ids.decode(idResponse, tenant, r.PathValue("id"))
	if !ok {
		notFound(w, "response_id", r.PathValue("id"))
		return
	}
	run := agent.Attach(a.c, id.Thread.workflowID(tenant), id.Run)
	res, err := run.State(r.Context())
	if err != nil {
		notFound(w, "response_id", r.PathValue("id"))
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
}

func (a *apiServer) meta(tenant string, id respID, model, prev string) respMeta {
	return respMeta{id: id, sid: a.ids.encode(idResponse, tenant, id), tenant: tenant, model: model, prev: prev, created: time.Now().Unix()}
}

// callID is a client tool call's id: authenticated, naming its run.
func (a *apiServer) callID(m respMeta, call string) string {
	id := m.id
	id.From, id.Lines, id.BaseIn, id.BaseOut, id.Call = 0, 0, 0, 0, call
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
		if l.Outcome == agent.Held {
			ap = approval
		}
		out = append(out, mcpCallItem(agent.CallItem{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Outcome: l.Outcome, ServedFrom: l.ServedFrom,
			Relation: l.Relation, Arguments: l.Arguments, Result: l.Result, Error: l.Error}, ap))
	}
	switch {
	case res.Status == agent.Completed && res.Answer != "":
		out = append(out, messageItem(fmt.Sprintf("msg_%s_%d", m.id.Run[:min(8, len(m.id.Run))], res.Turns), res.Answer, "completed"))
	case res.Status == agent.Interrupted && res.Interrupt != nil && res.Interrupt.Hook == agentrun.ClientToolsHook:
		for _, c := range res.Interrupt.Held {
			out = append(out, functionCallItem(a.callID(m, c.ID), c.Name, c.Arguments))
		}
	case res.Status == agent.Interrupted && res.Interrupt != nil:
		out = append(out, approvalItem(res.Interrupt))
	}
	return out
}

// responseObject is the Responses API object of a run's state.
func (a *apiServer) responseObject(m respMeta, res *agent.Result, runErr error) map[string]any {
	obj := map[string]any{"id": m.sid, "object": "response", "created_at": m.created, "model": m.model,
		"previous_response_id": nil, "error": nil, "incomplete_details": nil, "instructions": nil,
		"metadata":            map[string]any{"tulip_thread": m.id.Thread.workflowID(m.tenant), "tulip_run": m.id.Run},
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "temperature": nil, "top_p": nil,
		"usage": nil, "text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": "disabled"}
	if m.prev != "" {
		obj["previous_response_id"] = m.prev
	}
	switch res.Status {
	case agent.Completed:
		obj["status"] = "completed"
	case agent.Interrupted:
		if res.Interrupt != nil && res.Interrupt.Hook == agentrun.ClientToolsHook {
			obj["status"] = "completed" // the client's turn: its tools' calls are the output
		} else {
			obj["status"] = "incomplete"
			obj["incomplete_details"] = map[string]any{"reason": "tulip_interrupt"}
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
	obj["output"] = a.outputItems(m, res)
	return obj
}

// responseTokens are the tokens the run's model calls took since the
// response began.
func responseTokens(m respMeta, res *agent.Result) tokens {
	in, out, cached := runTokens(res)
	return tokens{in: max(0, in-m.id.BaseIn), out: max(0, out-m.id.BaseOut), cached: cached}
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

// failedAtStart: a run with client tools whose workers are elsewhere
// failed at its first task (a clash with their tools), answered as the 400
// it is, before a stream begins.
func (a *apiServer) failedAtStart(w http.ResponseWriter, ctx context.Context, run *agent.Run, tools []activities.ToolSpec) bool {
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
func publicSpecs(specs []activities.ToolSpec) []tulip.ToolSpec {
	if specs == nil {
		return nil
	}
	out := make([]tulip.ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = tulip.ToolSpec(s)
	}
	return out
}
