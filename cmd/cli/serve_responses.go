package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
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
	ID                string          `json:"id"`
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
	// interrupt is the interrupt the approval answers.
	interrupt string
	// earlier: the input resends items of earlier turns (history, as a
	// framework sends it when it does not use previous_response_id).
	earlier bool
	// continues is the response the resent history ends with, read from
	// the last earlier item whose id this server made (an answer's
	// message, an item_reference to it, a client tool's call): nil when
	// no earlier item names one.
	continues *respID
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
// approval answer, or client tool outputs; and, when the input resends
// earlier turns, the response they end with.
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
	if len(items) > maxInputItems {
		return in, "input", fmt.Sprintf("input holds at most %d items, not %d", maxInputItems, len(items))
	}
	var users []string
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch {
		case it.Type == "mcp_approval_response":
			if it.ApprovalRequestID == "" || it.Approve == nil {
				return in, param, "an mcp_approval_response needs approval_request_id and approve"
			}
			in.approval, in.target, in.results, users = &items[i], nil, nil, nil
			if id, ok := a.ids.decode(idApproval, tenant, it.ApprovalRequestID); ok {
				in.interrupt = id.Call
				id.Call = ""
				in.target = &id
			} else {
				in.interrupt = it.ApprovalRequestID
			}
		case it.Type == "function_call_output":
			call, ok := a.ids.decode(idCall, tenant, it.CallID)
			if !ok {
				return in, param + ".call_id", fmt.Sprintf("no tool call %q waits for a result here", shortID(it.CallID))
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
			// An earlier turn's item: what came before it (answers
			// included) is history too.
			in.earlier, users, in.approval, in.results, in.target = true, nil, nil, nil, nil
			a.noteEarlier(&in, tenant, it)
		case it.Type == "message" || it.Type == "":
			switch it.Role {
			case "system", "developer":
				// Instructions: read with the request's (docs/serve.md).
			case "user":
				if ap, ok := approvalPart(it.Content); ok {
					// An approval's answer as a message's content part
					// (LangChain sends it so).
					items[i].Type, items[i].ApprovalRequestID, items[i].Approve, items[i].Reason = "mcp_approval_response", ap.ApprovalRequestID, ap.Approve, ap.Reason
					if ap.ApprovalRequestID == "" || ap.Approve == nil {
						return in, param, "an mcp_approval_response needs approval_request_id and approve"
					}
					in.approval, in.target, in.results, users = &items[i], nil, nil, nil
					if id, ok := a.ids.decode(idApproval, tenant, ap.ApprovalRequestID); ok {
						in.interrupt = id.Call
						id.Call = ""
						in.target = &id
					} else {
						in.interrupt = ap.ApprovalRequestID
					}
					continue
				}
				if in.approval != nil {
					in.approval, in.target = nil, nil // an earlier turn's answer, then a new message
				}
				text, ok := contentText(it.Content)
				if !ok {
					return in, param + ".content", "a message's content is a string or input_text parts"
				}
				users = append(users, text)
			case "assistant":
				in.earlier, users, in.approval, in.results, in.target = true, nil, nil, nil, nil
				a.noteEarlier(&in, tenant, it)
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
	case len(in.results) > 0 && len(users) > 1:
		return in, "input", "tool outputs and one new user message at most go in a request"
	case len(users) > 1:
		return in, "input", "one new user message a request: the thread keeps the conversation (continue with previous_response_id)"
	case len(users) == 1:
		in.message = users[0]
	}
	return in, "", ""
}

// approvalPart reads a message's content when it is one
// mcp_approval_response part.
func approvalPart(raw json.RawMessage) (inputItem, bool) {
	var parts []inputItem
	if json.Unmarshal(raw, &parts) != nil || len(parts) != 1 || parts[0].Type != "mcp_approval_response" {
		return inputItem{}, false
	}
	return parts[0], true
}

// noteEarlier reads the response an earlier item names, when this server
// made its id for this tenant: an answer's message (resent, or an
// item_reference to it) or a client tool's call.
func (a *apiServer) noteEarlier(in *turnInput, tenant string, it inputItem) {
	var id respID
	var ok bool
	switch {
	case strings.HasPrefix(it.ID, idMessage):
		id, ok = a.ids.decode(idMessage, tenant, it.ID)
	case it.Type == "function_call":
		id, ok = a.ids.decode(idCall, tenant, it.CallID)
	}
	if ok {
		id.Call, id.From, id.Lines, id.BaseIn, id.BaseOut = "", 0, 0, 0, 0
		in.continues = &id
	}
}

// shortID is an id as an error message shows it: at most its first 64
// bytes.
func shortID(id string) string {
	if len(id) > 64 {
		return strings.ToValidUTF8(id[:64], "") + "..."
	}
	return id
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
	// ServerLabel names a hosted MCP tool ("mcp"): "tulip", the agent's
	// own tools, which a framework declares to take their calls and
	// approvals (the Agents SDK's hostedMcpTool).
	ServerLabel string `json:"server_label"`
	// Function holds the tool in Chat Completions' shape.
	Function *clientTool `json:"function"`
	// Tulip is tulip's extension: {"idempotent": true} serves an
	// identical repeat of the call from the log.
	Tulip *struct {
		Idempotent bool `json:"idempotent"`
	} `json:"tulip"`
}

// What one request may offer: OpenAI's own bound on tools, and bounds on
// their schemas that keep every check linear and small.
const (
	maxClientTools  = 128      // tools a request offers
	maxSchemaBytes  = 64 << 10 // one tool's parameters
	maxSchemasBytes = 1 << 20  // all of a request's tools' parameters
	maxSchemaDepth  = 32       // nesting of one tool's parameters
	maxInputItems   = 4096     // a request's input items or messages
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// clientTools reads a request's tools: function tools only, no clash with
// the agent's own, idempotent when marked (the tool's tulip field, or the
// request's metadata tulip_idempotent_tools: names, comma-separated). It
// refuses more than maxClientTools tools and schemas over their bounds,
// and its checks are linear in the request.
func (a *apiServer) clientTools(raw []json.RawMessage, metadata map[string]any) ([]activities.ToolSpec, string, string) {
	if len(raw) > maxClientTools {
		return nil, "tools", fmt.Sprintf("a request offers at most %d tools, not %d", maxClientTools, len(raw))
	}
	idem := map[string]bool{}
	if v, ok := metadata["tulip_idempotent_tools"].(string); ok {
		for _, n := range strings.Split(v, ",") {
			idem[strings.TrimSpace(n)] = true
		}
	}
	var specs []activities.ToolSpec
	names := make(map[string]bool, len(raw))
	total := 0
	for i, r := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		var t clientTool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, param, "a tool is an object: " + err.Error()
		}
		if t.Type == "mcp" && t.ServerLabel == "tulip" {
			continue // the agent's own tools, declared: they run on the server, approved by its hooks
		}
		if t.Type == "mcp" {
			return nil, param + ".server_label", fmt.Sprintf("the only MCP server here is the agent's own, server_label \"tulip\", not %q", t.ServerLabel)
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
		if !toolNameRE.MatchString(t.Name) {
			return nil, param + ".name", "a tool's name is 1-64 of a-z A-Z 0-9 _ -"
		}
		if a.ownTool(t.Name) {
			return nil, param + ".name", fmt.Sprintf("the tool %q is the agent's own (it runs on the server): give the client's tool another name", t.Name)
		}
		if names[t.Name] {
			return nil, param + ".name", fmt.Sprintf("the tool %q is offered twice", t.Name)
		}
		names[t.Name] = true
		params := t.Parameters
		if len(params) > maxSchemaBytes {
			return nil, param + ".parameters", fmt.Sprintf("a tool's parameters schema is at most %d bytes", maxSchemaBytes)
		}
		if total += len(params); total > maxSchemasBytes {
			return nil, param + ".parameters", fmt.Sprintf("the tools' parameters schemas are at most %d bytes together", maxSchemasBytes)
		}
		if jsonDepth(params) > maxSchemaDepth {
			return nil, param + ".parameters", fmt.Sprintf("a tool's parameters schema nests at most %d levels", maxSchemaDepth)
		}
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		specs = append(specs, activities.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params,
			Idempotent: idem[t.Name] || (t.Tulip != nil && t.Tulip.Idempotent)})
	}
	return specs, "", ""
}

// ownTool: name is one of the agent's own tools.
func (a *apiServer) ownTool(name string) bool {
	_, ok := a.toolSet[name]
	return ok
}

// jsonDepth is the deepest nesting of objects and arrays in valid JSON
// text, read in one pass.
func jsonDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
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
	clientWait                   time.Duration // 0: the server's
	// stream: the response is streamed, so the run streams its text (in
	// pieces of textBatch); an unstreamed one's text adds no history.
	stream bool
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
	wait := rr.clientWait
	if wait == 0 {
		wait = a.limits.clientWait
	}
	if len(rr.tools) == 0 {
		wait = 0 // no client tools: nothing to wait for (and the input stays as before)
	}
	return agent.Start(ctx, a.c, agent.Options{TaskQueue: a.taskQueue, Model: chatModel, Agent: rr.agent, ThreadID: wfID, ClientTimeout: wait,
		Message: rr.message, Hooks: a.hooks, MaxTurns: a.maxTurns, Stream: &agent.StreamOptions{Text: rr.stream, BatchMillis: textBatch, Content: true},
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
	if in.approval != nil && in.target != nil && (state.Interrupt == nil || state.Interrupt.ID != in.interrupt) {
		// The approval's id is one this server made for this run: the
		// run no longer waits for it, so it was answered.
		return nil, respID{}, a.standing(ctx, run, in.interrupt)
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
	release := func() {}
	if req.Stream {
		var ok bool
		if release, ok = a.acquireStream(w); !ok {
			return
		}
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
		if run, _, err := a.answer(ctx, tenant, *in.target, turnInput{results: in.results}); err == nil {
			_, _ = run.Await(ctx)
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
			if err := a.lastOfThread(ctx, tenant, *in.continues); err != nil {
				var ie inputError
				if errors.As(err, &ie) {
					badInput(w, ie.param, ie.msg)
				} else {
					runError(w, err, "input")
				}
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
			instructions: instructionsOf(req.Instructions, req.Input), params: params, tools: tools, clientWait: wait, stream: req.Stream}
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

// IdempotencyHeader names a request's idempotency key (docs/serve.md).
const IdempotencyHeader = "Idempotency-Key"

// keyedThread is the thread a request with an idempotency key starts: the
// same for the same tenant and key, on every server sharing the id key.
func (a *apiServer) keyedThread(tenant, key string) threadName {
	return threadName{Name: string(a.ids.mac("idempotency-key", tenant, []byte(key)))}
}

// startOnce starts a keyed request's run, or reaches the one its first
// try started.
func (a *apiServer) startOnce(ctx context.Context, tenant string, thread threadName, rr runRequest) (*agent.Run, error) {
	wfID := thread.workflowID(tenant)
	if run := a.existing(ctx, wfID); run != nil {
		return run, nil
	}
	run, err := a.start(ctx, tenant, thread, rr)
	if tulip.Is(err, tulip.ThreadBusy) {
		if run := a.existing(ctx, wfID); run != nil {
			return run, nil
		}
	}
	return run, err
}

// existing is the run a thread has, or nil when it has none.
func (a *apiServer) existing(ctx context.Context, wfID string) *agent.Run {
	desc, err := a.c.DescribeWorkflowExecution(ctx, wfID, "")
	if err != nil {
		return nil
	}
	return agent.Attach(a.c, wfID, desc.GetWorkflowExecutionInfo().GetFirstRunId())
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
		"usage": nil, "text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": "disabled"}
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
