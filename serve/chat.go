package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/agentrun"
)

// Chat Completions: POST /v1/chat/completions. The thread is named by the
// X-Tulip-Thread header (in the caller's tenant); without it each request
// is a new thread. A client tool's call is an assistant tool_calls message
// whose call ids name the run; the next request's tool messages answer it.

// chatRequest is the part of a chat completions request tulip reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools         []json.RawMessage `json:"tools"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	MaxTokens     *int              `json:"max_tokens"`
	MaxCompletion *int              `json:"max_completion_tokens"`
	Metadata      map[string]any    `json:"metadata"`
}

func (a *apiServer) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !a.decodeBody(w, r, &req) || !a.agentOf(w, req.Model) {
		return
	}
	ctx, tenant := r.Context(), tenantOf(r.Context())
	name := strings.TrimSpace(r.Header.Get(ThreadHeader))
	if len(name) > 256 || strings.ContainsAny(name, "\x00\n\r") {
		badInput(w, ThreadHeader, "a thread name is at most 256 characters on one line")
		return
	}
	tools, param, msg := a.clientTools(req.Tools, req.Metadata)
	if msg != "" {
		badInput(w, param, msg)
		return
	}
	wait, param, msg := a.clientWait(req.Metadata)
	if msg != "" {
		badInput(w, param, msg)
		return
	}
	maxTokens := req.MaxCompletion
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	params, param, msg := modelParams(req.Temperature, req.TopP, maxTokens)
	if msg != "" {
		badInput(w, strings.Replace(param, "max_output_tokens", "max_tokens", 1), msg)
		return
	}
	// The request's new part: the last user message, or the tool messages
	// after the last assistant message (a client tool's results).
	if len(req.Messages) > maxInputItems {
		badInput(w, "messages", fmt.Sprintf("a request holds at most %d messages, not %d", maxInputItems, len(req.Messages)))
		return
	}
	var instructions []string
	message, turns := "", 0
	var results, late []clientResult
	var target, continues, lateTarget *respID
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			if text, ok := contentText(m.Content); ok && strings.TrimSpace(text) != "" {
				instructions = append(instructions, text)
			}
		case "user":
			turns++
			text, ok := contentText(m.Content)
			if !ok {
				badInput(w, param+".content", "a message's content is a string or text parts")
				return
			}
			// Tool results right before a new message: a framework loop
			// that stopped after its tool ran (late results, taken below).
			late, lateTarget = results, target
			message, results, target = text, nil, nil
		case "assistant":
			turns++
			message, results, target, late, lateTarget = "", nil, nil, nil, nil
			// A client tool's call this server made names its thread: a
			// conversation resent without the header continues it.
			var calls []struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(m.ToolCalls, &calls) == nil {
				for _, c := range calls {
					if id, ok := a.ids.decode(idCall, tenant, c.ID); ok {
						id = respID{Thread: id.Thread, Run: id.Run}
						continues = &id
					}
				}
			}
		case "tool":
			call, ok := a.ids.decode(idCall, tenant, m.ToolCallID)
			if !ok {
				// A call of an earlier turn this server did not make
				// (or another tenant's): the thread holds what it knows.
				results, target = nil, nil
				continue
			}
			out, ok := contentText(m.Content)
			if !ok {
				badInput(w, param+".content", "a tool message's content is a string or text parts")
				return
			}
			if target != nil && (target.Thread != call.Thread || target.Run != call.Run) {
				badInput(w, param+".tool_call_id", "the tool messages answer calls of different responses")
				return
			}
			target = &call
			results = append(results, clientResult{call: call, output: out, param: param})
		default:
			badInput(w, param+".role", fmt.Sprintf("unknown role %q", m.Role))
			return
		}
	}
	if len(results) == 0 && strings.TrimSpace(message) == "" {
		badInput(w, "messages", "the last message must be the user's message, or tool messages answering the last assistant message's tool calls")
		return
	}
	if len(results) == 0 && name == "" && turns > 1 && continues == nil {
		badInput(w, "messages", "a conversation of several turns lives in a thread: send its new user message with the header "+ThreadHeader+": THREAD (the thread keeps the earlier turns)")
		return
	}
	if len(results) == 0 && name == "" && continues != nil {
		if !a.refuseUnlessLast(w, ctx, tenant, *continues, "messages") {
			return
		}
	}
	// Every refusal comes before the run starts: a streamed response takes
	// its stream slot first.
	release, ok := a.streamSlot(w, req.Stream)
	if !ok {
		return
	}
	defer release()
	if len(results) == 0 && len(late) > 0 {
		// The late results answer their held calls, when still held, and
		// the run answers; then the new message starts the next run.
		if run, _, err := a.answer(ctx, tenant, *lateTarget, turnInput{results: late}); err == nil {
			_, _ = run.Await(ctx)
		}
	}
	var run *agent.Run
	var id respID
	var err error
	if len(results) > 0 {
		run, id, err = a.answer(ctx, tenant, *target, turnInput{results: results})
	} else {
		thread := threadName{Chat: true, Name: name}
		switch {
		case name == "" && continues != nil:
			thread = continues.Thread
		case name == "":
			thread = newResponsesThread()
		}
		run, err = a.start(ctx, tenant, thread, runRequest{agent: req.Model, message: message,
			instructions: strings.Join(instructions, "\n\n"), params: params, tools: tools, clientWait: wait, stream: req.Stream})
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
		runError(w, err, ThreadHeader)
		return
	}
	if id.Thread.Chat {
		w.Header().Set(ThreadHeader, id.Thread.Name)
	}
	m := a.meta(tenant, id, req.Model, "")
	for _, t := range tools {
		m.clientTools = append(m.clientTools, t.Name)
	}
	cid := "chatcmpl-" + strings.TrimPrefix(m.sid, idResponse)
	if !req.Stream {
		res, err := run.Await(ctx)
		if res == nil || res.Status == agent.Failed {
			if err == nil {
				err = errorString(res.Error)
			}
			runError(w, err, ThreadHeader)
			return
		}
		writeJSONBounded(w, a.limits.write, http.StatusOK, a.chatObject(cid, m, res))
		return
	}
	if a.failedAtStart(w, ctx, run, tools) {
		return
	}
	a.streamChat(w, r, run, m, cid, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
}

// streamChat answers with chat.completion.chunk events: the text as it
// comes, then client tool calls (delta.tool_calls), a last chunk with
// finish_reason and the tulip field, the usage chunk when asked, [DONE].
func (a *apiServer) streamChat(w http.ResponseWriter, r *http.Request, run *agent.Run, m respMeta, cid string, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var werr error
	write := func(b []byte) {
		if werr != nil {
			return
		}
		_ = rc.SetWriteDeadline(time.Now().Add(a.limits.write))
		if _, werr = w.Write(b); werr == nil {
			werr = rc.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any, extra map[string]any) {
		obj := map[string]any{"id": cid, "object": "chat.completion.chunk", "created": m.created, "model": m.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		for k, v := range extra {
			obj[k] = v
		}
		b, _ := json.Marshal(obj)
		write([]byte("data: " + string(b) + "\n\n"))
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	said := map[int]string{} // the text said a turn (the watching goroutine's until follow returns)
	res, runErr, end := follow(r.Context(), a, run, m.id.From, func(ev agent.Event) string {
		if ev.Text == nil || ev.Text.Delta == "" {
			return ""
		}
		delta := ev.Text.Delta
		if ev.Text.Done { // the whole answer: what was not said yet
			delta = strings.TrimPrefix(delta, said[ev.Text.Turn])
		}
		said[ev.Text.Turn] += delta
		return delta
	}, func(delta string) bool {
		if delta != "" {
			chunk(map[string]any{"content": delta}, nil, nil)
		}
		return werr == nil
	})
	switch end {
	case followGone:
		return // the client left, or stopped reading: dropped (the run goes on)
	case followDraining:
		shutdownChunk(write, m)
		return
	}
	finish := any("stop")
	ext := map[string]any{}
	if res != nil {
		obj := a.chatObject(cid, m, res)
		ext = obj["tulip"].(map[string]any)
		msg := obj["choices"].([]any)[0].(map[string]any)
		finish = msg["finish_reason"]
		if calls, ok := msg["message"].(map[string]any)["tool_calls"].([]any); ok {
			for i, c := range calls {
				call := c.(map[string]any)
				call["index"] = i
				chunk(map[string]any{"tool_calls": []any{call}}, nil, nil)
			}
		}
	} else if runErr != nil {
		ext = map[string]any{"error": runErr.Error()}
	}
	if res == nil || res.Status == agent.Failed {
		// A failed run: OpenAI's error event, then the end.
		msg := "the run failed"
		if res != nil && res.Error != "" {
			msg = res.Error
		} else if runErr != nil {
			msg = runErr.Error()
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": "run_failed", "param": nil}})
		write([]byte("data: " + string(b) + "\n\n"))
		write([]byte("data: [DONE]\n\n"))
		return
	}
	chunk(map[string]any{}, finish, map[string]any{"tulip": ext})
	if includeUsage && res != nil {
		b, _ := json.Marshal(map[string]any{"id": cid, "object": "chat.completion.chunk", "created": m.created, "model": m.model,
			"choices": []any{}, "usage": responseTokens(m, res).chatUsage()})
		write([]byte("data: " + string(b) + "\n\n"))
	}
	write([]byte("data: [DONE]\n\n"))
}

// shutdownChunk ends a chat stream cut by the server's shutdown with
// OpenAI's error chunk: the run goes on, and its answer is read back
// through the Responses API (the response id in the error).
func shutdownChunk(write func([]byte), m respMeta) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": "server_error", "code": "server_shutting_down", "param": nil,
		"message": fmt.Sprintf("tulip serve is shutting down: the run goes on; read its answer with GET /v1/responses/%s", m.sid)}})
	write([]byte("data: " + string(b) + "\n\n"))
}

// chatObject is a chat completion of a run, with tulip's account of it
// (the "tulip" field: thread, status, the agent's calls as mcp_call items,
// interrupt). A client tool's calls are the message's tool_calls.
func (a *apiServer) chatObject(cid string, m respMeta, res *agent.Result) map[string]any {
	calls := []any{}
	for _, item := range a.outputItems(m, res) {
		if it, _ := item.(map[string]any); it["type"] == "mcp_call" {
			calls = append(calls, it)
		}
	}
	ext := map[string]any{"thread": m.id.Thread.workflowID(m.tenant), "response_id": m.sid, "status": res.Status, "calls": calls}
	message := map[string]any{"role": "assistant", "content": res.Answer, "refusal": nil}
	finish := "stop"
	switch {
	case res.Status == agent.Interrupted && res.Interrupt != nil && res.Interrupt.Hook == agentrun.ClientToolsHook:
		var toolCalls []any
		for _, c := range res.Interrupt.Held {
			args := c.Arguments
			if args == "" {
				args = "{}"
			}
			toolCalls = append(toolCalls, map[string]any{"id": a.callID(m, c.ID), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": args}})
		}
		message["content"], message["tool_calls"], finish = nil, toolCalls, "tool_calls"
	case res.Status == agent.Interrupted && res.Interrupt != nil:
		ext["interrupt"] = approvalItem(a.approvalID(m, res.Interrupt.ID), res.Interrupt)
		if res.Answer == "" {
			message["content"] = fmt.Sprintf("(the run waits for approval: %s; answer it with POST /v1/responses, docs/serve.md)", res.Interrupt.Reason)
		}
	}
	return map[string]any{"id": cid, "object": "chat.completion", "created": m.created, "model": m.model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish, "logprobs": nil}},
		"usage":   responseTokens(m, res).chatUsage(), "tulip": ext}
}
