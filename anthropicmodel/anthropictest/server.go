// Package anthropictest is a loopback server speaking Anthropic's Messages
// API, for testing models and agents without the network: it answers
// POST /v1/messages from a script, as JSON or as a server-sent event
// stream (as the request asks), and keeps every request. It checks each
// request as the API would: the anthropic-version header, roles that
// alternate, every tool_use answered by a tool_result at the head of the
// next user message, at most four cache breakpoints; a request that fails
// a check gets the API's 400 invalid_request_error and the violation is
// kept (Violations).
//
//	srv := anthropictest.New(anthropictest.ToolUse("toolu_1", "issue_refund", `{"order_id":"ord-1"}`),
//		anthropictest.Text("Refunded."))
//	defer srv.Close()
//	m, _ := anthropicmodel.New(anthropicmodel.Options{Model: "claude-test", BaseURL: srv.URL})
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// A Reply answers one request. stream says the request asked for a
// stream.
type Reply func(w http.ResponseWriter, stream bool)

// Request is one request the server received.
type Request struct {
	// Body is the request's JSON body, decoded.
	Body map[string]any
	// Raw is the body as sent.
	Raw string
	// Header holds the request's headers.
	Header http.Header
}

// Server is the loopback Messages API.
type Server struct {
	*httptest.Server
	mu         sync.Mutex
	script     []Reply
	requests   []Request
	violations []string
}

// New starts a server that answers its requests, in order, with script;
// past its end it answers Text("(script ended)").
func New(script ...Reply) *Server {
	s := &Server{script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests are the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Violations are the checks requests failed, one line each.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		body = nil
	}
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, Request{Body: body, Raw: string(raw), Header: r.Header.Clone()})
	var reply Reply
	if i < len(s.script) {
		reply = s.script[i]
	} else {
		reply = Text("(script ended)")
	}
	bad := check(r.Header, body)
	if bad != "" {
		s.violations = append(s.violations, fmt.Sprintf("request %d: %s", i+1, bad))
	}
	s.mu.Unlock()
	if bad != "" {
		Status(http.StatusBadRequest, "invalid_request_error", bad)(w, false)
		return
	}
	stream, _ := body["stream"].(bool)
	reply(w, stream)
}

// check is what the API would refuse in a request, or "".
func check(h http.Header, body map[string]any) string {
	if h.Get("anthropic-version") == "" {
		return "no anthropic-version header"
	}
	if body == nil {
		return "the body is not JSON"
	}
	if _, ok := body["model"].(string); !ok {
		return "model: field required"
	}
	if _, ok := body["max_tokens"].(float64); !ok {
		return "max_tokens: field required"
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return "messages: at least one message is required"
	}
	breakpoints := strings.Count(mustJSON(body), `"cache_control"`)
	if breakpoints > 4 {
		return fmt.Sprintf("a maximum of 4 blocks with cache_control may be provided; found %d", breakpoints)
	}
	var pending []string // tool_use ids the next user message must answer
	prevRole := ""
	for i, m := range msgs {
		msg, _ := m.(map[string]any)
		role, _ := msg["role"].(string)
		if role != "user" && role != "assistant" {
			return fmt.Sprintf("messages.%d.role: %q", i, role)
		}
		if role == prevRole {
			return fmt.Sprintf("messages.%d: roles must alternate (two %s messages)", i, role)
		}
		prevRole = role
		blocks, _ := msg["content"].([]any)
		if len(blocks) == 0 {
			if s, ok := msg["content"].(string); !ok || s == "" {
				return fmt.Sprintf("messages.%d: content is empty", i)
			}
		}
		if role == "user" {
			for j, id := range pending {
				if j >= len(blocks) {
					return fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
				}
				b, _ := blocks[j].(map[string]any)
				if b["type"] != "tool_result" {
					return fmt.Sprintf("messages.%d.content.%d: tool_result blocks must come first; found %v", i, j, b["type"])
				}
			}
			got := map[string]bool{}
			for _, b := range blocks {
				if bb, _ := b.(map[string]any); bb["type"] == "tool_result" {
					got[fmt.Sprint(bb["tool_use_id"])] = true
				}
			}
			for _, id := range pending {
				if !got[id] {
					return fmt.Sprintf("messages.%d: tool_use %s has no tool_result", i, id)
				}
			}
			for id := range got {
				if !contains(pending, id) {
					return fmt.Sprintf("messages.%d: unexpected tool_use_id %s in tool_result blocks", i, id)
				}
			}
			pending = nil
			continue
		}
		if len(pending) > 0 {
			return fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after", i)
		}
		for j, b := range blocks {
			bb, _ := b.(map[string]any)
			switch bb["type"] {
			case "tool_use":
				if _, ok := bb["input"].(map[string]any); !ok {
					return fmt.Sprintf("messages.%d.content.%d.input: an object is required", i, j)
				}
				pending = append(pending, fmt.Sprint(bb["id"]))
			case "text":
				if bb["text"] == "" {
					return fmt.Sprintf("messages.%d.content.%d: text content blocks must be non-empty", i, j)
				}
			}
		}
	}
	if prevRole != "user" && len(pending) > 0 {
		return "the last message's tool_use blocks have no tool_result"
	}
	return ""
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A Block is one content block of a scripted answer.
type Block struct {
	Type  string // "text" or "tool_use"
	Text  string
	ID    string
	Name  string
	Input string // a tool_use's input, JSON text
}

// TextBlock is a text block.
func TextBlock(text string) Block { return Block{Type: "text", Text: text} }

// ToolUseBlock is a tool_use block.
func ToolUseBlock(id, name, input string) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: input}
}

// Text answers with one text block.
func Text(text string) Reply { return Message(TextBlock(text)) }

// ToolUse answers with one tool_use block.
func ToolUse(id, name, input string) Reply { return Message(ToolUseBlock(id, name, input)) }

// Usage is the usage every scripted message reports.
var Usage = map[string]int{"input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}

// Message answers with blocks: a JSON message, or, when the request asked
// for a stream, the same message as events (text in pieces of at most five
// bytes, tool input JSON in pieces of at most seven).
func Message(blocks ...Block) Reply {
	stop := "end_turn"
	for _, b := range blocks {
		if b.Type == "tool_use" {
			stop = "tool_use"
		}
	}
	return func(w http.ResponseWriter, stream bool) {
		if !stream {
			var content []any
			for _, b := range blocks {
				if b.Type == "text" {
					content = append(content, map[string]any{"type": "text", "text": b.Text})
				} else {
					content = append(content, map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": json.RawMessage(b.Input)})
				}
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, mustJSON(map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
				"model": "claude-test", "content": content, "stop_reason": stop, "usage": Usage}))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(typ string, data map[string]any) {
			data["type"] = typ
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, mustJSON(data))
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		start := map[string]any{}
		for k, v := range Usage {
			start[k] = v
		}
		start["output_tokens"] = 1
		ev("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
			"model": "claude-test", "content": []any{}, "stop_reason": nil, "usage": start}})
		_, _ = io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
		for i, b := range blocks {
			if b.Type == "text" {
				ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
				for _, p := range pieces(b.Text, 5) {
					ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": p}})
				}
			} else {
				ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
				for _, p := range pieces(b.Input, 7) {
					ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
				}
			}
			ev("content_block_stop", map[string]any{"index": i})
		}
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": Usage["output_tokens"]}})
		ev("message_stop", map[string]any{})
	}
}

// pieces cuts s in pieces of at most n bytes, at rune boundaries.
func pieces(s string, n int) []string {
	var out []string
	cur := ""
	for _, r := range s {
		if len(cur)+len(string(r)) > n && cur != "" {
			out = append(out, cur)
			cur = ""
		}
		cur += string(r)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// Status answers with an API error: status, the error's type and message,
// and header name/value pairs (retry-after, say).
func Status(status int, typ, message string, header ...string) Reply {
	return func(w http.ResponseWriter, _ bool) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_test")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, mustJSON(map[string]any{"type": "error",
			"error": map[string]any{"type": typ, "message": message}}))
	}
}
