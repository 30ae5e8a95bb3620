package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// upstream is the scripted OpenAI-compatible model the workers call (as
// "openai", the model 'tulip serve' runs). It answers from the
// conversation in the request, never from a count:
//   - the last message a user's "Please refund ORDER #TAG": an
//     issue_refund call for ORDER, amount 20;
//   - the last message a user's "are you sure it went through? #TAG": the
//     same call for the order the latest earlier refund message named
//     (the re-emitted refund, which the thread's log must serve);
//   - tool results last: "Refunded ORDER: receipt ID." after a refund
//     message, "Yes, it went through: ORDER, receipt ID." after a
//     confirmation, ORDER and ID read from the tool's result.
//
// Every call waits delay first; the time each call took (from its request
// to its last byte) is added to its turn's, by the tag of the turn's user
// message.
type upstream struct {
	delay time.Duration
	srv   *http.Server
	url   string
	calls atomic.Int64

	mu    sync.Mutex
	turns map[string]*upstreamTurn
}

// upstreamTurn is the model's time on one turn.
type upstreamTurn struct {
	took  time.Duration
	calls int
}

var (
	refundRE  = regexp.MustCompile(`refund (ord-[0-9]+-[0-9]+)`)
	tagRE     = regexp.MustCompile(`#(\S+)\s*$`)
	receiptRE = regexp.MustCompile(`"refund_id"\s*:\s*"([^"]+)"`)
	orderRE   = regexp.MustCompile(`"order_id"\s*:\s*"([^"]+)"`)
)

const confirmText = "are you sure it went through?"

func startUpstream(delay time.Duration) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{delay: delay, turns: map[string]*upstreamTurn{}}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 10 * time.Second}
	u.url = "http://" + ln.Addr().String()
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func (u *upstream) close() { _ = u.srv.Close() }

// turn is the model's time on the turn tagged tag.
func (u *upstream) turn(tag string) upstreamTurn {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.turns[tag]; t != nil {
		return *t
	}
	return upstreamTurn{}
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is a message's content: a string, or the text of its parts.
func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	u.calls.Add(1)
	var body struct {
		Messages []chatMessage `json:"messages"`
		Stream   bool          `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, "a chat completion request", http.StatusBadRequest)
		return
	}
	msgs := body.Messages
	lastUser := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			lastUser = i
			break
		}
	}
	var tag string
	if lastUser >= 0 {
		if m := tagRE.FindStringSubmatch(msgs[lastUser].text()); m != nil {
			tag = m[1]
		}
	}
	defer func() {
		if tag == "" {
			return
		}
		u.mu.Lock()
		t := u.turns[tag]
		if t == nil {
			t = &upstreamTurn{}
			u.turns[tag] = t
		}
		t.took += time.Since(start)
		t.calls++
		u.mu.Unlock()
	}()
	select {
	case <-time.After(u.delay):
	case <-r.Context().Done():
		return
	}
	last := msgs[len(msgs)-1]
	if last.Role == "user" {
		content := last.text()
		order := ""
		if m := refundRE.FindStringSubmatch(content); m != nil {
			order = m[1]
		} else if strings.Contains(content, confirmText) {
			for i := lastUser - 1; i >= 0 && order == ""; i-- {
				if msgs[i].Role == "user" {
					if m := refundRE.FindStringSubmatch(msgs[i].text()); m != nil {
						order = m[1]
					}
				}
			}
		}
		if order != "" {
			writeToolCall(w, "call_"+strings.ReplaceAll(tag, "-", "_"), "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":20}`, order))
			return
		}
		writeAnswer(w, body.Stream, "I can refund orders: say which.")
		return
	}
	// Tool results: answer with what the refund returned.
	var results strings.Builder
	for _, m := range msgs[lastUser+1:] {
		if m.Role == "tool" {
			results.WriteString(m.text())
		}
	}
	order, receipt := "?", "?"
	if m := orderRE.FindStringSubmatch(results.String()); m != nil {
		order = m[1]
	}
	if m := receiptRE.FindStringSubmatch(results.String()); m != nil {
		receipt = m[1]
	}
	if lastUser >= 0 && strings.Contains(msgs[lastUser].text(), confirmText) {
		writeAnswer(w, body.Stream, confirmAnswer(order, receipt))
		return
	}
	writeAnswer(w, body.Stream, refundAnswer(order, receipt))
}

func refundAnswer(order, receipt string) string {
	return fmt.Sprintf("Refunded %s: receipt %s.", order, receipt)
}

func confirmAnswer(order, receipt string) string {
	return fmt.Sprintf("Yes, it went through: %s, receipt %s.", order, receipt)
}

func writeToolCall(w http.ResponseWriter, id, name, args string) {
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-" + id, "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls",
			"message": map[string]any{"role": "assistant", "content": nil,
				"tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}}}})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// writeAnswer answers text: whole, or streamed in two pieces.
func writeAnswer(w http.ResponseWriter, stream bool, text string) {
	if !stream {
		b, _ := json.Marshal(map[string]any{"object": "chat.completion", "choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	half := len(text) / 2
	for _, p := range []string{text[:half], text[half:]} {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": p}}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}
