package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/agentrun"
)

// The Responses API's server-sent events, fed from the run's live stream.
// One goroutine writes to the client, each write under a deadline and no
// lock: a client that stops reading is dropped when its write times out,
// and nothing else waits for it.

// sseEvent is one event: its sequence number, type and fields.
type sseEvent struct {
	seq    int64
	typ    string
	fields map[string]any
}

// sseWriter writes events to one client; its goroutine alone uses it.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	after   int64         // events at or before it are not sent
	timeout time.Duration // one write's deadline
	err     error         // the first write error: the client is gone
	last    int64         // the last sequence number sent (after, before any)
}

func (s *sseWriter) send(ev sseEvent) {
	if ev.seq <= s.after || s.err != nil {
		return
	}
	ev.fields["type"] = ev.typ
	ev.fields["sequence_number"] = ev.seq
	b, _ := json.Marshal(ev.fields)
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", ev.typ, b); err != nil {
		s.err = err
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return
	}
	s.last = ev.seq
}

// shutdownEvent ends a stream cut by the server's shutdown: an error
// event (every client reports it) that says where to resume: GET
// /v1/responses/{id}?stream=true&starting_after=N, on this server once
// restarted or on another of its instances.
func (s *sseWriter) shutdown(m respMeta) {
	if s.err != nil {
		return
	}
	after := max(s.last, s.after)
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	msg := fmt.Sprintf("tulip serve is shutting down: the response goes on; resume its stream with GET /v1/responses/%s?stream=true&starting_after=%d", m.sid, after)
	// The Responses API's error event, with its fields also under "error"
	// (clients that read an event's error there, openai-go's, report it).
	b, _ := json.Marshal(map[string]any{"type": "error", "code": "server_shutting_down", "param": nil, "sequence_number": after + 1, "message": msg,
		"error": map[string]any{"type": "server_error", "code": "server_shutting_down", "message": msg, "param": nil},
		"tulip": map[string]any{"response_id": m.sid, "starting_after": after}})
	if _, err := fmt.Fprintf(s.w, "event: error\ndata: %s\n\n", b); err == nil {
		_ = s.rc.Flush()
	}
}

// seqStride: an item at stream offset o yields events (o+1)*seqStride + k.
const seqStride = 16

// streamSlot takes a stream slot for a streamed request (one that is not
// streamed needs none), or answers 429; release gives it back.
func (a *apiServer) streamSlot(w http.ResponseWriter, stream bool) (release func(), ok bool) {
	if !stream {
		return func() {}, true
	}
	return a.acquireStream(w)
}

// acquireStream takes a stream slot, or answers 429.
func (a *apiServer) acquireStream(w http.ResponseWriter) (func(), bool) {
	select {
	case a.streams <- struct{}{}:
		return func() { <-a.streams }, true
	default:
		w.Header().Set("Retry-After", "1")
		apiError(w, http.StatusTooManyRequests, "rate_limit_error", "too_many_streams", "",
			fmt.Sprintf("this server streams %d responses at once already (tulip serve --max-streams): retry, or ask without stream", a.limits.maxStreams))
		return nil, false
	}
}

// textState builds the events of the run's stream items: a message item
// opened by the first piece of a turn's text and closed by its end, a
// call's mcp_call item. Only the watching goroutine uses it, until the
// watch ends.
type textState struct {
	a       *apiServer
	m       respMeta
	index   int  // the next output index
	msgOpen bool // a message item is open
	msgID   string
	msgIdx  int
	text    strings.Builder
	turn    int
	attempt int
	opened  map[int]bool
	last    int64 // the last offset read
}

func (t *textState) closeMsg(seq int64, evs []sseEvent) (int64, []sseEvent) {
	if !t.msgOpen {
		return seq, evs
	}
	s := t.text.String()
	evs = append(evs,
		sseEvent{seq, "response.output_text.done", map[string]any{"item_id": t.msgID, "output_index": t.msgIdx, "content_index": 0, "text": s, "logprobs": []any{}}},
		sseEvent{seq + 1, "response.content_part.done", map[string]any{"item_id": t.msgID, "output_index": t.msgIdx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": s, "annotations": []any{}}}},
		sseEvent{seq + 2, "response.output_item.done", map[string]any{"output_index": t.msgIdx, "item": messageItem(t.msgID, s, "completed")}})
	t.msgOpen = false
	return seq + 3, evs
}

// events turns one stream event into its SSE events.
func (t *textState) events(ev agent.Event) []sseEvent {
	t.last = ev.Offset
	seq := (ev.Offset + 1) * seqStride
	var evs []sseEvent
	switch {
	case ev.Text != nil:
		ti := ev.Text
		if t.msgOpen && (t.turn != ti.Turn || (!ti.Done && t.attempt != ti.Attempt)) {
			// A new turn, or the model asked again (a retried call): a new
			// message item.
			seq, evs = t.closeMsg(seq, evs)
		}
		if ti.Done && ti.Delta == "" {
			_, evs = t.closeMsg(seq, evs)
			return evs
		}
		if !t.msgOpen {
			t.msgOpen, t.turn, t.attempt, t.msgIdx = true, ti.Turn, ti.Attempt, t.index
			t.msgID = t.a.messageID(t.m, ti.Turn, 0)
			if t.opened[ti.Turn] {
				t.msgID = t.a.messageID(t.m, ti.Turn, ti.Attempt)
			}
			t.opened[ti.Turn] = true
			t.index++
			t.text.Reset()
			evs = append(evs,
				sseEvent{seq, "response.output_item.added", map[string]any{"output_index": t.msgIdx, "item": messageItem(t.msgID, "", "in_progress")}},
				sseEvent{seq + 1, "response.content_part.added", map[string]any{"item_id": t.msgID, "output_index": t.msgIdx, "content_index": 0,
					"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}})
			seq += 2
		}
		delta := ti.Delta
		if ti.Done {
			// The whole answer (its pieces were not all streamed): what the
			// deltas so far did not say.
			delta = strings.TrimPrefix(delta, t.text.String())
		}
		t.text.WriteString(delta)
		evs = append(evs, sseEvent{seq, "response.output_text.delta", map[string]any{"item_id": t.msgID, "output_index": t.msgIdx, "content_index": 0, "delta": delta, "logprobs": []any{}}})
		if ti.Done {
			_, evs = t.closeMsg(seq+1, evs)
		}
	case ev.Call != nil:
		if ev.Call.Agent == "" && slices.Contains(t.m.clientTools, ev.Call.Tool) {
			return nil // the client's call: a function_call item when the run stops for it
		}
		seq, evs = t.closeMsg(seq, evs)
		evs = append(evs, mcpCallEvents(seq, t.index, mcpCallItem(*ev.Call, ""))...)
		t.index++
	}
	return evs
}

// mcpCallEvents are an mcp_call item's events (6 of them).
func mcpCallEvents(seq int64, index int, item map[string]any) []sseEvent {
	id := item["id"]
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"], added["output"], added["error"] = "in_progress", nil, nil
	end := "response.mcp_call.completed"
	if item["status"] == "failed" {
		end = "response.mcp_call.failed"
	} else if item["status"] == "in_progress" {
		end = "response.mcp_call.in_progress"
	}
	return []sseEvent{
		{seq, "response.output_item.added", map[string]any{"output_index": index, "item": added}},
		{seq + 1, "response.mcp_call.in_progress", map[string]any{"output_index": index, "item_id": id}},
		{seq + 2, "response.mcp_call_arguments.delta", map[string]any{"output_index": index, "item_id": id, "delta": item["arguments"]}},
		{seq + 3, "response.mcp_call_arguments.done", map[string]any{"output_index": index, "item_id": id, "arguments": item["arguments"]}},
		{seq + 4, end, map[string]any{"output_index": index, "item_id": id}},
		{seq + 5, "response.output_item.done", map[string]any{"output_index": index, "item": item}},
	}
}

// functionCallEvents are a client tool call's events (4 of them).
func functionCallEvents(seq int64, index int, item map[string]any) []sseEvent {
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"], added["arguments"] = "in_progress", ""
	return []sseEvent{
		{seq, "response.output_item.added", map[string]any{"output_index": index, "item": added}},
		{seq + 1, "response.function_call_arguments.delta", map[string]any{"output_index": index, "item_id": item["id"], "delta": item["arguments"]}},
		{seq + 2, "response.function_call_arguments.done", map[string]any{"output_index": index, "item_id": item["id"], "arguments": item["arguments"]}},
		{seq + 3, "response.output_item.done", map[string]any{"output_index": index, "item": item}},
	}
}

// streamResponse answers with the Responses API's server-sent events, fed
// from the run's live stream from the response's first offset, until the
// run ends or stops for an interrupt. Its caller holds a stream slot.
func (a *apiServer) streamResponse(w http.ResponseWriter, r *http.Request, run *agent.Run, m respMeta, after int64) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{w: w, rc: http.NewResponseController(w), after: after, timeout: a.limits.write, last: after}
	created := a.responseObject(m, &agent.Result{Status: agent.Running}, nil)
	seqBase := m.id.From * seqStride // sequence numbers start at the response's first offset
	out.send(sseEvent{seqBase, "response.created", map[string]any{"response": created}})
	out.send(sseEvent{seqBase + 1, "response.in_progress", map[string]any{"response": created}})

	st := &textState{a: a, m: m, opened: map[int]bool{}, last: m.id.From - 1}
	res, runErr, end := follow(r.Context(), a, run, m.id.From, st.events, func(evs []sseEvent) bool {
		for _, ev := range evs {
			out.send(ev)
		}
		return out.err == nil
	})
	switch end {
	case followGone:
		return // the client left, or stopped reading: dropped (the run goes on)
	case followDraining:
		out.shutdown(m) // the client resumes from its last sequence number
		return
	}
	ctx := r.Context()
	seq := (st.last + 2) * seqStride
	var evs []sseEvent
	seq, evs = st.closeMsg(seq, nil)
	if res == nil {
		res = &agent.Result{Status: agent.Failed}
		if runErr != nil {
			res.Error = runErr.Error()
		}
	}
	final := a.responseObject(m, res, runErr)
	client := res.Status == agent.Interrupted && res.Interrupt != nil && res.Interrupt.Hook == agentrun.ClientToolsHook
	if e := a.offset(ctx, run); st.last+1 < e && res.Status != agent.Interrupted {
		// A closed run's stream cannot be read again (a closed workflow
		// takes no stream read): its output items, numbered after its
		// last offset.
		seq = (e + 2) * seqStride
		for i, item := range final["output"].([]any) {
			it, _ := item.(map[string]any)
			switch it["type"] {
			case "message":
				text := res.Answer
				evs = append(evs,
					sseEvent{seq, "response.output_item.added", map[string]any{"output_index": i, "item": messageItem(it["id"].(string), "", "in_progress")}},
					sseEvent{seq + 1, "response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "delta": text, "logprobs": []any{}}},
					sseEvent{seq + 2, "response.output_text.done", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}}},
					sseEvent{seq + 3, "response.output_item.done", map[string]any{"output_index": i, "item": item}})
				seq += 4
			case "mcp_call":
				evs = append(evs, mcpCallEvents(seq, i, it)...)
				seq += 6
			}
		}
	}
	if res.Status == agent.Interrupted && res.Interrupt != nil {
		for _, item := range final["output"].([]any) {
			it, _ := item.(map[string]any)
			switch {
			case client && it["type"] == "function_call":
				evs = append(evs, functionCallEvents(seq, st.index, it)...)
				seq += 4
				st.index++
			case !client && it["type"] == "mcp_approval_request":
				evs = append(evs,
					sseEvent{seq, "response.output_item.added", map[string]any{"output_index": st.index, "item": it}},
					sseEvent{seq + 1, "response.output_item.done", map[string]any{"output_index": st.index, "item": it}})
				seq += 2
				st.index++
			}
		}
	}
	switch final["status"] {
	case "completed":
		evs = append(evs, sseEvent{seq, "response.completed", map[string]any{"response": final}})
	case "incomplete":
		evs = append(evs, sseEvent{seq, "response.incomplete", map[string]any{"response": final}})
	default:
		evs = append(evs, sseEvent{seq, "response.failed", map[string]any{"response": final}})
	}
	for _, ev := range evs {
		out.send(ev)
	}
}

// followEnd is how a follow ended.
type followEnd int

const (
	followed       followEnd = iota // the run ended, or stopped for an interrupt, and its stream is read
	followGone                      // the client left, or stopped reading
	followDraining                  // the server is shutting down
)

// follow streams a run to one client, for both APIs: a goroutine watches
// the run's live stream from offset from and turns each event into the
// client's (convert, which only that goroutine calls until follow
// returns); this goroutine writes them (write, false when the client is
// gone) and awaits the run. When the run has ended, its stream is read to
// its end; when it stopped for an interrupt, up to its offset then (its
// stream stays open); either at most 10 s. It returns the run's result
// (nil and the error when awaiting it failed).
func follow[T any](ctx context.Context, a *apiServer, run *agent.Run, from int64, convert func(agent.Event) T, write func(T) bool) (*agent.Result, error, followEnd) {
	type batch struct {
		offset int64
		out    T
	}
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	batches := make(chan batch, 64)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = run.Watch(wctx, from, func(ev agent.Event) error {
			select {
			case batches <- batch{ev.Offset, convert(ev)}:
				return nil
			case <-wctx.Done():
				return wctx.Err()
			}
		})
	}()
	type awaited struct {
		res *agent.Result
		err error
	}
	awaitDone := make(chan awaited, 1)
	go func() {
		res, err := run.Await(ctx)
		awaitDone <- awaited{res, err}
	}()
	var (
		res      *agent.Result
		runErr   error
		finished bool             // Await returned
		seen     = from - 1       // the last offset written
		end      = int64(-1)      // an interrupted run's offset: read up to it
		deadline <-chan time.Time // when the watch is given up
	)
loop:
	for {
		if finished && end >= 0 && seen+1 >= end {
			cancelWatch()
		}
		select {
		case b := <-batches:
			if !write(b.out) {
				return nil, nil, followGone
			}
			seen = b.offset
		case <-watched:
			break loop
		case aw := <-awaitDone:
			finished, res, runErr = true, aw.res, aw.err
			if ctx.Err() != nil {
				return nil, nil, followGone
			}
			if res != nil && res.Status == agent.Interrupted {
				end = a.offset(ctx, run)
			}
			deadline = time.After(10 * time.Second)
		case <-deadline:
			cancelWatch()
		case <-a.draining:
			return nil, nil, followDraining
		case <-ctx.Done():
			return nil, nil, followGone
		}
	}
	// The watch has ended: convert's state is the caller's now.
	for len(batches) > 0 {
		if !write((<-batches).out) {
			return nil, nil, followGone
		}
	}
	if !finished {
		select {
		case aw := <-awaitDone:
			res, runErr = aw.res, aw.err
		case <-ctx.Done():
			return nil, nil, followGone
		case <-a.draining:
			return nil, nil, followDraining
		}
	}
	return res, runErr, followed
}
