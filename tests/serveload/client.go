package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// The conversations. Each loops turns until the duration ends: on a
// thread, "Please refund ORDER" (a new order each time), then "are you
// sure it went through?", and so on; after -thread-turns turns it starts
// a new thread. Every message is a streamed POST /v1/responses through
// the proxy; a thread's first message carries an Idempotency-Key, the
// others previous_response_id.
//
// The rule that neither loses nor repeats a message:
//
//  1. The response's id comes first (response.created) before the run's
//     work. Once a message's id is known, the message is never sent
//     again: a stream cut short (serve's shutdown ends it with an error
//     event that says where to resume, or the connection breaks) is read
//     on with GET /v1/responses/{id}?stream=true&starting_after=N, on
//     whichever instance the proxy picks, until it ends. GETs are safe to
//     repeat, and are repeated on any error, 404 included: serve answers
//     404 too when it cannot read the run's state in time (its query
//     unanswered while the run's worker is gone or busy).
//  2. Before its id is known, a thread's first message is sent again with
//     the same Idempotency-Key, whatever went wrong: serve reaches the
//     run a first try started instead of starting another.
//  3. Before its id is known, a message with previous_response_id is sent
//     again only when it provably started no run: the proxy found no
//     instance to write it to (503 with notSentHeader: the connection
//     refused, or the request not written whole), or serve refused it
//     before starting anything (429 too_many_streams, 409 thread_busy).
//     Anything else is ambiguous: the request written and then its
//     connection lost with no answer (502 with ambiguousHeader, or the
//     client's own connection error), or a 5xx from serve (a start
//     Temporal may have made although it answered an error). Such a
//     message is not sent again, and counts as lost.
//  4. The proxy takes an instance out of rotation before it is stopped,
//     as a load balancer drains one at a rolling restart, so no new
//     request races its listener's close.
//
// openai-go's own retries are off (option.WithMaxRetries(0)): it would
// resend a POST after a connection error or a 5xx, which rule 3 forbids.

// turn is one message and what came of it.
type turn struct {
	Conv    int    `json:"conv"`
	K       int    `json:"k"`
	Kind    string `json:"kind"` // "refund" or "confirm"
	Order   string `json:"order"`
	Tag     string `json:"tag"`
	First   bool   `json:"first"` // the thread's first message (keyed)
	Receipt string `json:"receipt,omitempty"`
	// want is a confirmation's expected receipt (its refund's).
	want string
	// pending is the response id of a turn whose answer did not come
	// within -turn-timeout: read again once the load is over (settle).
	pending string

	Start    time.Time     `json:"-"`
	Latency  time.Duration `json:"latency"`
	Answered bool          `json:"answered"`
	Lost     string        `json:"lost,omitempty"`  // why no answer came
	Late     bool          `json:"late,omitempty"`  // answered after -turn-timeout (read once the load was over)
	Wrong    string        `json:"wrong,omitempty"` // what is wrong with the answer
	Sends    int           `json:"sends"`           // POSTs (1 unless rule 2 or 3 sent it again)
	Resumes  int           `json:"resumes"`         // GETs that read the stream on
}

// clientStats count what the conversations met.
type clientStats struct {
	resendKeyed   atomic.Int64 // rule 2
	resendRefused atomic.Int64 // rule 3: serve refused it
	resendNotSent atomic.Int64 // rule 3: no instance took it
	shutdownCuts  atomic.Int64 // streams ended by server_shutting_down
	brokenStreams atomic.Int64 // streams that ended otherwise without their end
	threads       atomic.Int64
}

type load struct {
	cfg   config
	oc    openai.Client
	stats clientStats
	end   time.Time
	run   string // this run's nonce, in idempotency keys

	mu       sync.Mutex
	turns    []*turn
	sent     atomic.Int64
	answered atomic.Int64
	log      func(format string, args ...any)
}

func newClient(baseURL, token string, conns int) openai.Client {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: conns + 16, MaxIdleConnsPerHost: conns + 16, IdleConnTimeout: time.Minute}}
	return openai.NewClient(option.WithBaseURL(baseURL+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0), option.WithHTTPClient(hc))
}

// conversation runs conversation c's turns.
func (l *load) conversation(ctx context.Context, c int) {
	var prev string           // the thread's last response id ("" : start a thread)
	var onThread int          // turns on the thread so far
	var order, receipt string // the thread's last refund
	// With a think time, conversations start spread over it and pause
	// 0.5 to 1.5 times it: not all in step.
	think := func(f float64) bool {
		d := min(time.Duration(f*float64(l.cfg.think)), time.Until(l.end))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	if l.cfg.think > 0 && !think(rand.Float64()) {
		return
	}
	for k := 1; ctx.Err() == nil && time.Now().Before(l.end) && (l.cfg.turns == 0 || k <= l.cfg.turns); k++ {
		if onThread >= l.cfg.threadTurns {
			prev, onThread = "", 0
		}
		t := &turn{Conv: c, K: k, Tag: fmt.Sprintf("%d-%d", c, k), First: prev == "", Start: time.Now()}
		if onThread%2 == 0 {
			t.Kind, t.Order = "refund", fmt.Sprintf("ord-%d-%d", c, k)
		} else {
			t.Kind, t.Order, t.want = "confirm", order, receipt
		}
		l.mu.Lock()
		l.turns = append(l.turns, t)
		l.mu.Unlock()
		l.sent.Add(1)
		final := l.send(ctx, t, prev, l.cfg.turnTimeout)
		t.Latency = time.Since(t.Start)
		if final == nil {
			prev, onThread = "", 0 // the thread's state is unknown: a new one
			continue
		}
		t.Answered = true
		l.answered.Add(1)
		t.Wrong = check(t, final)
		if t.Kind == "refund" {
			order, receipt = t.Order, t.Receipt
		}
		if t.First {
			l.stats.threads.Add(1)
		}
		prev = final.ID
		onThread++
		if l.cfg.think > 0 {
			think(0.5 + rand.Float64())
		}
	}
}

// message is turn t's user message.
func message(t *turn) string {
	if t.Kind == "refund" {
		return fmt.Sprintf("Please refund %s #%s", t.Order, t.Tag)
	}
	return fmt.Sprintf("%s #%s", confirmText, t.Tag)
}

// send sends t's message and reads its response to its end, by the rule
// above, within timeout. It returns the final response, or nil with
// t.Lost set.
func (l *load) send(ctx context.Context, t *turn, prev string, timeout time.Duration) *responses.Response {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	params := responses.ResponseNewParams{Model: "support",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(message(t))}}
	var opts []option.RequestOption
	if prev != "" {
		params.PreviousResponseID = openai.String(prev)
	} else {
		opts = append(opts, option.WithHeader("Idempotency-Key", fmt.Sprintf("serveload-%s-%s", l.run, t.Tag)))
	}
	var id string
	after := int64(-1)
	backoff := 100 * time.Millisecond
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, 2*time.Second)
			return true
		}
	}
	for {
		if ctx.Err() != nil {
			t.Lost = "no answer within -turn-timeout"
			if id == "" {
				t.Lost += " (no response id)"
			}
			t.pending = id
			if id == "" && t.First {
				t.pending = "keyed"
			}
			return nil
		}
		var st *ssestream.Stream[responses.ResponseStreamEventUnion]
		if id == "" {
			t.Sends++
			st = l.oc.Responses.NewStreaming(ctx, params, opts...)
		} else {
			t.Resumes++
			q := responses.ResponseGetParams{}
			if after >= 0 {
				q.StartingAfter = openai.Int(after)
			}
			st = l.oc.Responses.GetStreaming(ctx, id, q)
		}
		final, cut, err := read(st, &id, &after)
		if final != nil {
			return final
		}
		if cut {
			l.stats.shutdownCuts.Add(1)
		}
		switch {
		case id != "":
			// Rule 1: read on.
			if !cut && ctx.Err() == nil {
				l.stats.brokenStreams.Add(1)
				l.log("turn %s: stream of %s broken (%v): reading on", t.Tag, shortID(id), err)
			}
			if cut || wait() {
				continue
			}
		case t.First:
			// Rule 2: the same key.
			l.stats.resendKeyed.Add(1)
			l.log("turn %s: first message failed before its id (%v): sending again with its key", t.Tag, err)
			if wait() {
				continue
			}
		default:
			var ae *openai.Error
			switch {
			case errors.As(err, &ae) && ae.Response != nil && ae.Response.Header.Get(notSentHeader) != "":
				l.stats.resendNotSent.Add(1)
			case errors.As(err, &ae) && (ae.StatusCode == http.StatusTooManyRequests || ae.StatusCode == http.StatusConflict):
				l.stats.resendRefused.Add(1)
				l.log("turn %s: refused %d %s: sending again", t.Tag, ae.StatusCode, ae.Code)
			default:
				// Ambiguous, or refused for good: not sent again.
				t.Lost = fmt.Sprintf("not sent again: %v", err)
				return nil
			}
			if wait() {
				continue
			}
		}
	}
}

// settle reads again, until they end or ctx does, the responses of the
// turns that had no answer within -turn-timeout: a late answer is not a
// lost message (it is checked as any other, and its latency is when it
// was read). A thread's first message whose id never came is sent again
// with its key (rule 2). The rest stay lost.
func (l *load) settle(ctx context.Context) {
	l.mu.Lock()
	var late []*turn
	for _, t := range l.turns {
		if t.pending != "" {
			late = append(late, t)
		}
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, t := range late {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if t.pending == "keyed" {
				l.stats.resendKeyed.Add(1)
				t.Lost = ""
				deadline, _ := ctx.Deadline()
				if r := l.send(ctx, t, "", time.Until(deadline)); r != nil {
					t.Late, t.Answered = true, true
					t.Latency = time.Since(t.Start)
					t.Wrong = check(t, r)
					l.answered.Add(1)
				} else {
					t.Lost += " (sent again with its key once the load was over)"
				}
				return
			}
			for ctx.Err() == nil {
				r, err := l.oc.Responses.Get(ctx, t.pending, responses.ResponseGetParams{})
				if err == nil && r.Status != responses.ResponseStatusInProgress && r.Status != responses.ResponseStatusQueued {
					t.Lost, t.Late, t.Answered = "", true, true
					t.Latency = time.Since(t.Start)
					t.Wrong = check(t, r)
					l.answered.Add(1)
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
			t.Lost += fmt.Sprintf("; still no answer %s after the load", l.cfg.settle)
		}()
	}
	wg.Wait()
}

// read reads a response stream: it sets *id from response.created and
// *after to the last sequence number read, and returns the final response
// (completed, failed or incomplete), or whether serve's shutdown cut the
// stream (its error event says where to resume), or the error.
func read(st *ssestream.Stream[responses.ResponseStreamEventUnion], id *string, after *int64) (*responses.Response, bool, error) {
	defer st.Close()
	for st.Next() {
		ev := st.Current()
		switch ev.Type {
		case "response.created":
			if *id == "" {
				*id = ev.Response.ID
			}
		case "response.completed", "response.failed", "response.incomplete":
			r := ev.Response
			return &r, false, nil
		case "error":
			if shutdownCut([]byte(ev.RawJSON()), id, after) {
				return nil, true, nil
			}
			return nil, false, fmt.Errorf("error event: %s %s", ev.Code, ev.Message)
		}
		*after = max(*after, ev.SequenceNumber)
	}
	err := st.Err()
	var se *ssestream.StreamError
	switch {
	case errors.As(err, &se) && shutdownCut(se.Event.Data, id, after):
		// openai-go reports an event with an "error" field as the
		// stream's error.
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	return nil, false, errors.New("the stream ended before the response did")
}

// shutdownCut reads serve's shutdown error event (code
// server_shutting_down, its fields also under "error"): it sets *id (when
// not yet known) and *after from what it says, and says whether it was
// one.
func shutdownCut(data []byte, id *string, after *int64) bool {
	var e struct {
		Code  string `json:"code"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Tulip struct {
			ResponseID    string `json:"response_id"`
			StartingAfter *int64 `json:"starting_after"`
		} `json:"tulip"`
	}
	if json.Unmarshal(data, &e) != nil || (e.Code != "server_shutting_down" && e.Error.Code != "server_shutting_down") ||
		e.Tulip.StartingAfter == nil || e.Tulip.ResponseID == "" {
		return false
	}
	if *id == "" {
		*id = e.Tulip.ResponseID
	}
	*after = *e.Tulip.StartingAfter
	return true
}

// check is what is wrong with t's final response ("" when nothing): it
// must be completed, with one issue_refund call for t's order, executed
// for a refund and served from the log (cached) for a confirmation with
// the refund's receipt, and the text the model says from that receipt.
func check(t *turn, r *responses.Response) string {
	receipt := t.want
	if r.Status != responses.ResponseStatusCompleted {
		return fmt.Sprintf("status %s: %s", r.Status, r.Error.Message)
	}
	var calls []responses.ResponseOutputItemUnion
	for _, it := range r.Output {
		if it.Type == "mcp_call" {
			calls = append(calls, it)
		}
	}
	if len(calls) != 1 || calls[0].Name != "issue_refund" {
		return fmt.Sprintf("%d mcp_call items, want one issue_refund: %s", len(calls), clip(r.RawJSON()))
	}
	var args struct {
		OrderID string `json:"order_id"`
	}
	_ = json.Unmarshal([]byte(calls[0].Arguments.OfString), &args)
	var ext struct {
		Tulip struct {
			Outcome string `json:"outcome"`
			Result  struct {
				RefundID string `json:"refund_id"`
			} `json:"result"`
		} `json:"tulip"`
	}
	_ = json.Unmarshal([]byte(calls[0].RawJSON()), &ext)
	got := ext.Tulip.Result.RefundID
	t.Receipt = got
	want, answer := "executed", refundAnswer(t.Order, got)
	if t.Kind == "confirm" {
		want, answer = "cached", confirmAnswer(t.Order, receipt)
	}
	switch {
	case args.OrderID != t.Order:
		return fmt.Sprintf("the refund named %q, want %q", args.OrderID, t.Order)
	case ext.Tulip.Outcome != want:
		return fmt.Sprintf("the refund's outcome %q, want %q", ext.Tulip.Outcome, want)
	case !strings.HasPrefix(got, "re_"):
		return fmt.Sprintf("the refund's receipt %q", got)
	case t.Kind == "confirm" && got != receipt:
		return fmt.Sprintf("the confirmed refund's receipt %s, the refund's %s", got, receipt)
	case r.OutputText() != answer:
		return fmt.Sprintf("answer %q, want %q", r.OutputText(), answer)
	}
	return ""
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func shortID(id string) string {
	if len(id) > 16 {
		return id[:16] + "..."
	}
	return id
}
