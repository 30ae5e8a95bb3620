package cli

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// 'tulip serve': an OpenAI-compatible HTTP server in front of durable
// threads (docs/serve.md). A request is a run on a thread; a response's id
// names the thread and the run.

type agentList []string

func (a *agentList) String() string { return strings.Join(*a, ",") }
func (a *agentList) Set(v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return errors.New("empty agent name")
	}
	*a = append(*a, v)
	return nil
}

func (e *env) serve(args []string) error {
	fs := e.flags("serve")
	c := e.connFlags(fs)
	mf := newModelFlags(fs, modelHelp{
		baseURL:   "OpenAI-compatible API root of the model the worker calls (not needed with --no-worker)",
		model:     "model name (not needed with --no-worker)",
		apiKeyEnv: "environment variable with the model's API key (read by the worker; with --provider anthropic the default is ANTHROPIC_API_KEY)",
		keyHeader: `header for the model's key: default "Authorization: Bearer KEY"; "api-key" for Azure OpenAI`,
	})
	var agents agentList
	fs.Var(&agents, "agent", "an agent served, named by a request's \"model\" (repeat it; default: "+agentrun.DefaultAgent+")")
	hookList := fs.String("hooks", "", "comma-separated hooks each run installs (upper_order_id, block_page_oncall, approve_isolate_host)")
	maxTurns := fs.Int("max-turns", 0, "model turn limit (default 32)")
	db := fs.String("db", "", "embedded server state file (threads outlive the process)")
	listen := fs.String("listen", "127.0.0.1:8787", "HOST:PORT to serve HTTP on (port 0: a free one)")
	noWorker := fs.Bool("no-worker", false, "run no worker in this process: workers elsewhere poll --task-queue")
	taskQueue := fs.String("task-queue", ChatTaskQueue, "the workers' task queue")
	keyFile := fs.String("api-key-file", "", "file holding the bearer token clients must send (Authorization: Bearer TOKEN); default: no check")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || (!*noWorker && mf.missing()) {
		return usageError{"usage: tulip serve ([--provider openai|anthropic] --base-url URL --model NAME | --no-worker) [--listen HOST:PORT] [--agent NAME]... [--hooks H,...] [--api-key-file FILE] [--db FILE | --address A] [--task-queue Q] [--mcp NAME=COMMAND ARGS...]"}
	}
	if len(agents) == 0 {
		agents = agentList{agentrun.DefaultAgent}
	}
	var hooks []string
	for _, h := range strings.Split(*hookList, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if _, ok := demo.Hooks()[h]; !ok {
				return usageError{fmt.Sprintf("unknown hook %q", h)}
			}
			hooks = append(hooks, h)
		}
	}
	var token string
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return fmt.Errorf("--api-key-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return usageError{"--api-key-file holds no token"}
		}
	}
	if !*noWorker {
		if _, err := mf.mcp.build(); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %v", err)
	}
	defer ln.Close()
	s, err := e.connect(c, true, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	if !*noWorker {
		stop, _, err := e.chatWorkerOn(s, mf, *taskQueue)
		if err != nil {
			return err
		}
		defer stop()
	}
	srv := &apiServer{c: s.client, taskQueue: *taskQueue, agents: agents, hooks: hooks, maxTurns: *maxTurns, token: token}
	// Requests end with the process (their runs go on in Temporal).
	hs := &http.Server{Handler: srv.handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return e.ctx }}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	if s.server != nil {
		fmt.Fprintf(e.stdout, "Temporal server: %s\n", s.server.Address())
	}
	fmt.Fprintf(e.stdout, "tulip serve: http://%s/v1\n", ln.Addr())
	select {
	case <-e.ctx.Done():
	case err := <-done:
		return err
	}
	e.progress("stopping")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
	return nil
}

// apiServer answers the OpenAI-compatible endpoints.
type apiServer struct {
	c         client.Client
	taskQueue string
	agents    []string
	hooks     []string
	maxTurns  int
	token     string
}

func (a *apiServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", a.models)
	mux.HandleFunc("POST /v1/responses", a.createResponse)
	mux.HandleFunc("GET /v1/responses/{id}", a.getResponse)
	mux.HandleFunc("POST /v1/chat/completions", a.chatCompletions)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "invalid_request_error", "not_found", "", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(a.token)) != 1 {
				apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", "missing or wrong bearer token (Authorization: Bearer TOKEN)")
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// apiError writes an OpenAI-shaped error.
func apiError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	body := map[string]any{"message": msg, "type": typ, "code": nil, "param": nil}
	if code != "" {
		body["code"] = code
	}
	if param != "" {
		body["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": body})
}

func badInput(w http.ResponseWriter, param, msg string) {
	apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", param, msg)
}

// runError writes the error of starting, resuming or awaiting a run.
func runError(w http.ResponseWriter, err error) {
	var rf *agent.RunFailedError
	switch k := tulip.KindOf(err); {
	case k == tulip.ThreadBusy:
		apiError(w, http.StatusConflict, "invalid_request_error", "thread_busy", "previous_response_id", err.Error()+" (answer its interrupt, or wait for it)")
	case k == tulip.BadInput:
		badInput(w, "input", err.Error())
	case k == tulip.StaleInterrupt || k == tulip.NotInterrupted:
		apiError(w, http.StatusConflict, "invalid_request_error", string(k), "input", err.Error())
	case errors.As(err, &rf) && (k == tulip.RunFailed || k == ""):
		apiError(w, http.StatusBadGateway, "upstream_error", "model_failed", "", err.Error())
	case errors.As(err, &rf):
		apiError(w, http.StatusInternalServerError, "server_error", string(k), "", err.Error())
	default:
		apiError(w, http.StatusInternalServerError, "server_error", string(k), "", err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *apiServer) models(w http.ResponseWriter, r *http.Request) {
	var data []map[string]any
	for _, name := range a.agents {
		data = append(data, map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "tulip"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// agentOf checks a request's model names a served agent.
func (a *apiServer) agentOf(w http.ResponseWriter, model string) bool {
	if model == "" {
		badInput(w, "model", "model is required: the agent to run (GET /v1/models lists them)")
		return false
	}
	if !slices.Contains(a.agents, model) {
		apiError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "model",
			fmt.Sprintf("the model %q does not exist: this server runs the agents %s", model, strings.Join(a.agents, ", ")))
		return false
	}
	return true
}

func (a *apiServer) start(ctx context.Context, agentName, thread, message string) (*agent.Run, error) {
	return agent.Start(ctx, a.c, agent.Options{TaskQueue: a.taskQueue, Model: chatModel, Agent: agentName, ThreadID: thread,
		Message: message, Hooks: a.hooks, MaxTurns: a.maxTurns, Stream: &agent.StreamOptions{Text: true, Content: true}})
}

// respID names a response: its thread, its run, and the stream offset it
// starts at (non-zero for the response that answered an interrupt).
type respID struct {
	Thread, Run string
	From        int64
}

func (id respID) String() string {
	return "resp_" + base64.RawURLEncoding.EncodeToString([]byte(id.Thread+"\n"+id.Run+"\n"+strconv.FormatInt(id.From, 10)))
}

func parseRespID(s string) (respID, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, "resp_"))
	if err != nil || !strings.HasPrefix(s, "resp_") {
		return respID{}, false
	}
	parts := strings.Split(string(b), "\n")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return respID{}, false
	}
	from, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || from < 0 {
		return respID{}, false
	}
	return respID{Thread: parts[0], Run: parts[1], From: from}, true
}

func newThreadID() string { return "tulip-serve-" + randomID() + randomID() }

// responsesRequest is the part of a Responses API request tulip reads.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	PreviousResponseID string          `json:"previous_response_id"`
	Stream             bool            `json:"stream"`
}

// inputItem is a Responses API input item: a message, or an answer to an
// approval request (mcp_approval_response).
type inputItem struct {
	Type              string          `json:"type"`
	Role              string          `json:"role"`
	Content           json.RawMessage `json:"content"`
	ApprovalRequestID string          `json:"approval_request_id"`
	Approve           *bool           `json:"approve"`
	Reason            string          `json:"reason"`
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

func (a *apiServer) createResponse(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
		badInput(w, "", "the body is not a JSON object: "+err.Error())
		return
	}
	if !a.agentOf(w, req.Model) {
		return
	}
	var prev respID
	if req.PreviousResponseID != "" {
		var ok bool
		if prev, ok = parseRespID(req.PreviousResponseID); !ok {
			apiError(w, http.StatusNotFound, "invalid_request_error", "response_not_found", "previous_response_id",
				fmt.Sprintf("no response %q", req.PreviousResponseID))
			return
		}
	}
	// The input: one user message, or one approval answer.
	var message string
	var approval *inputItem
	var s string
	switch {
	case len(req.Input) == 0:
		badInput(w, "input", "input is required")
		return
	case json.Unmarshal(req.Input, &s) == nil:
		message = s
	default:
		var items []inputItem
		if err := json.Unmarshal(req.Input, &items); err != nil {
			badInput(w, "input", "input is a string or a list of input items")
			return
		}
		users := 0
		for i, it := range items {
			switch {
			case it.Type == "mcp_approval_response":
				if it.ApprovalRequestID == "" || it.Approve == nil {
					badInput(w, fmt.Sprintf("input[%d]", i), "an mcp_approval_response needs approval_request_id and approve")
					return
				}
				approval = &items[i]
			case it.Type == "message" || it.Type == "":
				switch it.Role {
				case "system", "developer":
					// The agent has its own instructions: ignored.
				case "user":
					text, ok := contentText(it.Content)
					if !ok {
						badInput(w, fmt.Sprintf("input[%d].content", i), "a message's content is a string or input_text parts")
						return
					}
					message, users = text, users+1
				default:
					badInput(w, fmt.Sprintf("input[%d].role", i), fmt.Sprintf("role %q: the thread keeps the conversation; send only the new user message (continue with previous_response_id)", it.Role))
					return
				}
			default:
				badInput(w, fmt.Sprintf("input[%d].type", i), fmt.Sprintf("input items of type %q are not supported (message, mcp_approval_response)", it.Type))
				return
			}
		}
		if users > 1 {
			badInput(w, "input", "one user message a request: the thread keeps the conversation (continue with previous_response_id)")
			return
		}
		if approval != nil && users > 0 {
			badInput(w, "input", "an approval answer and a message go in separate requests")
			return
		}
	}
	if approval == nil && strings.TrimSpace(message) == "" {
		badInput(w, "input", "input holds no user message")
		return
	}
	ctx := r.Context()
	var id respID
	var run *agent.Run
	if approval != nil {
		if req.PreviousResponseID == "" {
			badInput(w, "previous_response_id", "an approval answer continues the response that asked it: give previous_response_id")
			return
		}
		run = agent.Attach(a.c, prev.Thread, prev.Run)
		from := a.offset(ctx, prev)
		in := agent.Approve(approval.ApprovalRequestID)
		if !*approval.Approve {
			reason := approval.Reason
			if reason == "" {
				reason = "declined"
			}
			in = agent.Decline(approval.ApprovalRequestID, reason)
		}
		if _, err := run.Resume(ctx, in); err != nil {
			runError(w, err)
			return
		}
		id = respID{Thread: prev.Thread, Run: prev.Run, From: from}
	} else {
		thread := prev.Thread
		if thread == "" {
			thread = newThreadID()
		}
		var err error
		if run, err = a.start(ctx, req.Model, thread, message); err != nil {
			runError(w, err)
			return
		}
		id = respID{Thread: thread, Run: run.RunID()}
	}
	meta := respMeta{id: id, model: req.Model, prev: req.PreviousResponseID, created: time.Now().Unix()}
	if req.Stream {
		a.streamResponse(w, r, run, meta, -1)
		return
	}
	res, err := run.Await(ctx)
	if res == nil || err != nil {
		runError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, responseObject(meta, res, nil))
}

// offset is the run's stream offset now (0 when it cannot be read).
func (a *apiServer) offset(ctx context.Context, id respID) int64 {
	var end int64
	if v, err := a.c.QueryWorkflow(ctx, id.Thread, id.Run, streams.OffsetQuery); err == nil {
		_ = v.Get(&end)
	}
	return end
}

func (a *apiServer) getResponse(w http.ResponseWriter, r *http.Request) {
	id, ok := parseRespID(r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "invalid_request_error", "response_not_found", "response_id", fmt.Sprintf("no response %q", r.PathValue("id")))
		return
	}
	run := agent.Attach(a.c, id.Thread, id.Run)
	res, err := run.State(r.Context())
	if err != nil {
		apiError(w, http.StatusNotFound, "invalid_request_error", "response_not_found", "response_id", fmt.Sprintf("response %s: %v", r.PathValue("id"), err))
		return
	}
	meta := respMeta{id: id, model: res.Agent}
	// stream=true in the query (the Responses API), or in a JSON body
	// (openai-go's GetStreaming sends it so).
	var body struct {
		Stream bool `json:"stream"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&body)
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
		runErr = errors.New(res.Error)
	}
	writeJSON(w, http.StatusOK, responseObject(meta, res, runErr))
}

type respMeta struct {
	id      respID
	model   string
	prev    string
	created int64
}

// callItem is a function_call output item with tulip's outcome (the
// "tulip" extension field, docs/serve.md).
func callItem(ci agent.CallItem) map[string]any {
	ext := map[string]any{"outcome": ci.Outcome, "turn": ci.Turn}
	if ci.ServedFrom != nil {
		ext["served_from"] = *ci.ServedFrom
	}
	if ci.Relation != "" {
		ext["relation"] = ci.Relation
	}
	if len(ci.Result) > 0 && string(ci.Result) != "null" {
		ext["result"] = ci.Result
	}
	if ci.Error != nil {
		ext["error"] = *ci.Error
	}
	args := string(ci.Arguments)
	if args == "" {
		args = "{}"
	}
	status := "completed"
	if ci.Outcome == agent.Held {
		status = "in_progress"
	}
	return map[string]any{"type": "function_call", "id": "fc_" + ci.CallID + "_" + string(ci.Outcome), "call_id": ci.CallID,
		"name": ci.Tool, "arguments": args, "status": status, "tulip": ext}
}

func messageItem(id, text, status string) map[string]any {
	content := []any{}
	if status == "completed" || text != "" {
		content = append(content, map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}})
	}
	return map[string]any{"type": "message", "id": id, "role": "assistant", "status": status, "content": content}
}

// approvalItem asks for an interrupt's answer: an mcp_approval_request
// whose id is the interrupt's, with the held calls (docs/serve.md).
func approvalItem(in *agent.Interrupt) map[string]any {
	var held []map[string]any
	name, args := "", "{}"
	for i, c := range in.Held {
		held = append(held, map[string]any{"call_id": c.ID, "name": c.Name, "arguments": string(c.Arguments)})
		if i == 0 {
			name, args = c.Name, string(c.Arguments)
		}
	}
	return map[string]any{"type": "mcp_approval_request", "id": in.ID, "server_label": "tulip", "name": name, "arguments": args,
		"tulip": map[string]any{"hook": in.Hook, "reason": in.Reason, "turn": in.Turn, "held": held}}
}

// responseObject is the Responses API object of a run's state.
func responseObject(m respMeta, res *agent.Result, runErr error) map[string]any {
	out := []any{}
	for _, l := range res.Trace {
		out = append(out, callItem(agent.CallItem{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Outcome: l.Outcome, ServedFrom: l.ServedFrom,
			Relation: l.Relation, Arguments: l.Arguments, Result: l.Result, Error: l.Error}))
	}
	obj := map[string]any{"id": m.id.String(), "object": "response", "created_at": m.created, "model": m.model,
		"previous_response_id": nil, "error": nil, "incomplete_details": nil, "instructions": nil, "metadata": map[string]any{"tulip_thread": m.id.Thread, "tulip_run": m.id.Run},
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "usage": nil}
	if m.prev != "" {
		obj["previous_response_id"] = m.prev
	}
	switch res.Status {
	case agent.Completed:
		obj["status"] = "completed"
		if res.Answer != "" {
			out = append(out, messageItem(fmt.Sprintf("msg_%s_%d", m.id.Run, res.Turns), res.Answer, "completed"))
		}
	case agent.Interrupted:
		obj["status"] = "incomplete"
		obj["incomplete_details"] = map[string]any{"reason": "tulip_interrupt"}
		if res.Interrupt != nil {
			out = append(out, approvalItem(res.Interrupt))
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
	obj["output"] = out
	return obj
}

// sse writes server-sent events; sequence numbers come from the run's
// stream offsets (docs/serve.md): an item at offset o yields events
// (o+1)*seqStride + k; events at or before `after` are not sent.
type sse struct {
	w     http.ResponseWriter
	fl    http.Flusher
	after int64
	mu    sync.Mutex
	err   error
}

const seqStride = 16

func (s *sse) send(seq int64, typ string, fields map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.after || s.err != nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = seq
	b, _ := json.Marshal(fields)
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		s.err = err
		return
	}
	s.fl.Flush()
}

// streamResponse answers with the Responses API's server-sent events, fed
// from the run's live stream from the response's first offset, until the
// run ends or stops for an interrupt.
func (a *apiServer) streamResponse(w http.ResponseWriter, r *http.Request, run *agent.Run, m respMeta, after int64) {
	fl, ok := w.(http.Flusher)
	if !ok {
		apiError(w, http.StatusInternalServerError, "server_error", "", "", "streaming is not supported here")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, fl: fl, after: after}
	ctx := r.Context()
	created := responseObject(m, &agent.Result{Status: agent.Running}, nil)
	seqBase := m.id.From * seqStride // sequence numbers start at the response's first offset
	out.send(seqBase, "response.created", map[string]any{"response": created})
	out.send(seqBase+1, "response.in_progress", map[string]any{"response": created})

	var (
		mu      sync.Mutex
		index   int    // the next output index
		msgOpen bool   // a message item is open
		msgID   string // its id
		msgIdx  int    // its output index
		text    strings.Builder
		turn    int              // the turn of the open message
		attempt int              // the model call's attempt it shows
		opened  = map[int]bool{} // turns that had a message item
		last    = m.id.From - 1  // the last offset read
	)
	closeMsg := func(seq int64) int64 {
		if !msgOpen {
			return seq
		}
		t := text.String()
		out.send(seq, "response.output_text.done", map[string]any{"item_id": msgID, "output_index": msgIdx, "content_index": 0, "text": t, "logprobs": []any{}})
		out.send(seq+1, "response.content_part.done", map[string]any{"item_id": msgID, "output_index": msgIdx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": t, "annotations": []any{}}})
		out.send(seq+2, "response.output_item.done", map[string]any{"output_index": msgIdx, "item": messageItem(msgID, t, "completed")})
		msgOpen = false
		return seq + 3
	}
	onEvent := func(ev agent.Event) error {
		mu.Lock()
		defer mu.Unlock()
		last = ev.Offset
		seq := (ev.Offset + 1) * seqStride
		switch {
		case ev.Text != nil:
			ti := ev.Text
			if msgOpen && (turn != ti.Turn || (!ti.Done && attempt != ti.Attempt)) {
				// A new turn, or the model asked again (a retried call):
				// a new message item.
				seq = closeMsg(seq)
			}
			if ti.Done && ti.Delta == "" {
				closeMsg(seq)
				return nil
			}
			if !msgOpen {
				msgOpen, turn, attempt, msgIdx = true, ti.Turn, ti.Attempt, index
				msgID = fmt.Sprintf("msg_%s_%d", m.id.Run, ti.Turn)
				if opened[ti.Turn] {
					msgID = fmt.Sprintf("msg_%s_%d_%d", m.id.Run, ti.Turn, ti.Attempt)
				}
				opened[ti.Turn] = true
				index++
				text.Reset()
				out.send(seq, "response.output_item.added", map[string]any{"output_index": msgIdx, "item": messageItem(msgID, "", "in_progress")})
				out.send(seq+1, "response.content_part.added", map[string]any{"item_id": msgID, "output_index": msgIdx, "content_index": 0,
					"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
				seq += 2
			}
			delta := ti.Delta
			if ti.Done {
				// The whole answer (its pieces were not all streamed):
				// what the deltas so far did not say.
				delta = strings.TrimPrefix(delta, text.String())
			}
			text.WriteString(delta)
			out.send(seq, "response.output_text.delta", map[string]any{"item_id": msgID, "output_index": msgIdx, "content_index": 0, "delta": delta, "logprobs": []any{}})
			if ti.Done {
				closeMsg(seq + 1)
			}
		case ev.Call != nil:
			seq = closeMsg(seq)
			item := callItem(*ev.Call)
			out.send(seq, "response.output_item.added", map[string]any{"output_index": index, "item": item})
			out.send(seq+1, "response.output_item.done", map[string]any{"output_index": index, "item": item})
			index++
		}
		return nil
	}
	// Follow the stream while the run goes; an interrupted run's stream
	// stays open: it is read up to its current offset.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan error, 1)
	go func() { watched <- run.Watch(wctx, m.id.From, onEvent) }()
	res, err := run.Await(ctx)
	if ctx.Err() != nil {
		// The client left: the run goes on. No event is written once the
		// handler returns.
		cancel()
		<-watched
		return
	}
	if res != nil && res.Status == agent.Interrupted {
		end := a.offset(ctx, m.id)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			caught := last+1 >= end
			mu.Unlock()
			if caught {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		<-watched
	} else {
		select {
		case <-watched:
		case <-time.After(10 * time.Second):
			cancel()
			<-watched
		}
	}
	mu.Lock()
	defer mu.Unlock()
	seq := (last + 2) * seqStride
	seq = closeMsg(seq)
	if res == nil {
		res = &agent.Result{Status: agent.Failed}
		if err != nil {
			res.Error = err.Error()
		}
	}
	final := responseObject(m, res, err)
	if end := a.offset(ctx, m.id); last+1 < end && res.Status != agent.Interrupted {
		// A closed run's stream cannot be read again (a closed workflow
		// takes no poll): its output items, numbered after its last offset.
		seq = (end + 2) * seqStride
		for i, item := range final["output"].([]any) {
			if it, ok := item.(map[string]any); ok && it["type"] == "message" {
				text := res.Answer
				out.send(seq, "response.output_item.added", map[string]any{"output_index": i, "item": messageItem(it["id"].(string), "", "in_progress")})
				out.send(seq+1, "response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "delta": text, "logprobs": []any{}})
				out.send(seq+2, "response.output_text.done", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}})
				seq += 3
			} else {
				out.send(seq, "response.output_item.added", map[string]any{"output_index": i, "item": item})
				seq++
			}
			out.send(seq, "response.output_item.done", map[string]any{"output_index": i, "item": item})
			seq++
		}
	}
	if res.Status == agent.Interrupted && res.Interrupt != nil {
		item := approvalItem(res.Interrupt)
		out.send(seq, "response.output_item.added", map[string]any{"output_index": index, "item": item})
		out.send(seq+1, "response.output_item.done", map[string]any{"output_index": index, "item": item})
		seq += 2
	}
	switch final["status"] {
	case "completed":
		out.send(seq, "response.completed", map[string]any{"response": final})
	case "incomplete":
		out.send(seq, "response.incomplete", map[string]any{"response": final})
	default:
		out.send(seq, "response.failed", map[string]any{"response": final})
	}
}

// chatRequest is the part of a chat completions request tulip reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
}

// ThreadHeader names the thread of a chat completion request (and of its
// answer).
const ThreadHeader = "X-Tulip-Thread"

func (a *apiServer) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
		badInput(w, "", "the body is not a JSON object: "+err.Error())
		return
	}
	if !a.agentOf(w, req.Model) {
		return
	}
	thread := strings.TrimSpace(r.Header.Get(ThreadHeader))
	message, turns := "", 0
	for i, msg := range req.Messages {
		switch msg.Role {
		case "system", "developer":
		case "user", "assistant", "tool":
			turns++
			if msg.Role == "user" {
				text, ok := contentText(msg.Content)
				if !ok {
					badInput(w, fmt.Sprintf("messages[%d].content", i), "a message's content is a string or text parts")
					return
				}
				message = text
			}
		default:
			badInput(w, fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("unknown role %q", msg.Role))
			return
		}
	}
	if n := len(req.Messages); n == 0 || req.Messages[n-1].Role != "user" || strings.TrimSpace(message) == "" {
		badInput(w, "messages", "the last message must be the user's message")
		return
	}
	if thread == "" && turns > 1 {
		badInput(w, "messages", "a conversation of several turns lives in a thread: send its new user message with the header "+ThreadHeader+": THREAD (the thread keeps the earlier turns)")
		return
	}
	if thread == "" {
		thread = newThreadID()
	}
	run, err := a.start(r.Context(), req.Model, thread, message)
	if err != nil {
		if tulip.Is(err, tulip.ThreadBusy) {
			apiError(w, http.StatusConflict, "invalid_request_error", "thread_busy", ThreadHeader, err.Error())
			return
		}
		runError(w, err)
		return
	}
	w.Header().Set(ThreadHeader, thread)
	rid := respID{Thread: thread, Run: run.RunID()}.String()
	id := "chatcmpl-" + strings.TrimPrefix(rid, "resp_")
	created := time.Now().Unix()
	if !req.Stream {
		res, err := run.Await(r.Context())
		if res == nil || res.Status == agent.Failed {
			if err == nil {
				err = errors.New(res.Error)
			}
			runError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, chatObject(id, rid, req.Model, created, thread, res))
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		apiError(w, http.StatusInternalServerError, "server_error", "", "", "streaming is not supported here")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	chunk := func(delta map[string]any, finish any, extra map[string]any) {
		obj := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		for k, v := range extra {
			obj[k] = v
		}
		b, _ := json.Marshal(obj)
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	said := map[int]string{}
	wctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	watched := make(chan error, 1)
	go func() {
		watched <- run.Watch(wctx, 0, func(ev agent.Event) error {
			if ev.Text != nil && ev.Text.Delta != "" {
				delta := ev.Text.Delta
				if ev.Text.Done { // the whole answer: what was not said yet
					delta = strings.TrimPrefix(delta, said[ev.Text.Turn])
				}
				if delta != "" {
					said[ev.Text.Turn] += delta
					chunk(map[string]any{"content": delta}, nil, nil)
				}
			}
			return nil
		})
	}()
	res, err := run.Await(r.Context())
	if r.Context().Err() != nil {
		cancel() // the client left: the run goes on
		<-watched
		return
	}
	// A closed run's stream ends by itself; an interrupted run's is left
	// open: the items it has are read by then.
	wait := 10 * time.Second
	if res == nil || res.Status == agent.Interrupted {
		wait = 500 * time.Millisecond
	}
	select {
	case <-watched:
	case <-time.After(wait):
		cancel()
		<-watched
	}
	final := map[string]any{}
	if res != nil {
		final = chatObject(id, rid, req.Model, created, thread, res)
	} else if err != nil {
		final["tulip"] = map[string]any{"thread": thread, "error": err.Error()}
	}
	chunk(map[string]any{}, "stop", map[string]any{"tulip": final["tulip"]})
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// chatObject is a chat completion of a run, with tulip's account of it
// (the "tulip" field: thread, status, calls, interrupt).
func chatObject(id, rid, model string, created int64, thread string, res *agent.Result) map[string]any {
	var calls []any
	for _, l := range res.Trace {
		calls = append(calls, callItem(agent.CallItem{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Outcome: l.Outcome, ServedFrom: l.ServedFrom,
			Relation: l.Relation, Arguments: l.Arguments, Result: l.Result, Error: l.Error}))
	}
	ext := map[string]any{"thread": thread, "response_id": rid, "status": res.Status, "calls": calls}
	content := res.Answer
	if res.Status == agent.Interrupted && res.Interrupt != nil {
		ext["interrupt"] = approvalItem(res.Interrupt)
		if content == "" {
			content = fmt.Sprintf("(the run waits for approval: %s; answer it with POST /v1/responses, docs/serve.md)", res.Interrupt.Reason)
		}
	}
	return map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"tulip":   ext}
}
