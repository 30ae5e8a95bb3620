package agentrun

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// StreamOptions choose what a run streams (docs/protocol.md, "Live
// runs"): Temporal's Workflow Streams, read by any SDK's workflow-streams
// client or streams.Subscribe. The zero value streams every decision on
// tulip.calls (items published by the workflow itself: no history event,
// and no cost at all while nobody polls) and each answer whole on
// tulip.text once the model returns.
type StreamOptions struct {
	// Off turns the stream off: no handlers, no items.
	Off bool `json:"off,omitempty"`
	// Text streams the model's answer as it is generated (tulip.text
	// pieces, sent by the model activity by signal: one history event per
	// batch). Zero: off.
	Text bool `json:"text,omitempty"`
	// BatchMillis is the interval of those batches. Zero: 300.
	BatchMillis int `json:"batch_ms,omitempty"`
	// Content adds each call's arguments and result (or error) to its
	// tulip.calls item, each up to ContentLimit bytes. Zero: off (items
	// carry no arguments or results).
	Content bool `json:"content,omitempty"`
}

// ContentLimit bounds a call item's arguments and result (Content): a
// longer one is left out and its size given.
const ContentLimit = 16 << 10

// streamCarryBytes bounds the stream a run hands to its continuation.
const streamCarryBytes = 64 << 10

// CallItem is one item of the tulip.calls topic: a tool-call decision, as
// its trace line says it (a held call has a second item once the resume
// settles it).
type CallItem struct {
	Turn    int     `json:"turn"`
	CallID  string  `json:"call_id"`
	Tool    string  `json:"tool"`
	Outcome Outcome `json:"outcome"`
	// ServedFrom and Relation, for a served (cached) call.
	ServedFrom *int           `json:"served_from,omitempty"`
	Relation   dedup.Relation `json:"relation,omitempty"`
	// KeyHash is the first 16 hex digits of SHA-256 of the downstream key.
	KeyHash string `json:"key_hash,omitempty"`
	// Failed says the outcome is an error.
	Failed bool `json:"failed,omitempty"`
	// NearMiss, for a call that ran although its tool had records: the
	// reason and the paths that differ (no values).
	NearMiss *CallNearMiss `json:"near_miss,omitempty"`
	// Arguments, Result and Error, with StreamOptions.Content.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *string         `json:"error,omitempty"`
	// CutBytes, with Content: the size of an argument or result text left
	// out for being over ContentLimit.
	CutBytes int `json:"cut_bytes,omitempty"`
	// Agent, on a call a sub-agent made, is its agent path
	// ("support/refunds"): published by the parent when the sub-agent's
	// call returns, before the parent's own item for that call.
	Agent string `json:"agent,omitempty"`
}

// CallNearMiss is a call item's near miss, without values.
type CallNearMiss struct {
	Record int                  `json:"record"`
	Reason dedup.NearMissReason `json:"reason"`
	Paths  []string             `json:"paths,omitempty"`
}

// openStream registers the run's stream (its handlers), holding what the
// run it continues handed over.
func (r *run) openStream(ctx wf.Context) error {
	if !r.stateByRef || (r.in.Stream != nil && r.in.Stream.Off) {
		return nil
	}
	var prior *streams.State
	if c := r.in.Continued; c != nil {
		prior = c.Stream
	}
	opts := streams.Options{CarryBytes: streamCarryBytes, ReadOnDemand: r.streamOnDemand}
	// Runs recorded before the run refused other publishers append every
	// batch signalled to them, as they did. A run that streams text asks
	// at its start (its model activity needs the token); any other asks
	// when a batch first arrives, so that a stream nobody publishes to
	// adds no event.
	if r.in.Stream != nil && r.in.Stream.Text {
		if err := r.streamVersion(ctx); err != nil {
			return err
		}
	}
	logger := wf.GetLogger(ctx)
	opts.Accept = func(in streams.PublishInput) bool {
		if r.refusing == 0 {
			_ = r.streamVersion(ctx) // no token to draw: never fails
		}
		if r.refusing < 0 {
			return true
		}
		if why := r.refusePublish(in); why != "" {
			logger.Warn("tulip: a batch published to the run's stream from outside the run was dropped",
				"publisher_id", in.PublisherID, "items", len(in.Items), "why", why)
			return false
		}
		return true
	}
	s, err := streams.New(ctx, prior, opts)
	if err != nil {
		return err
	}
	r.stream = s
	return nil
}

// streamVersion decides whether the run refuses batches from outside it
// (refusing), and draws the model activity's publisher token when the
// run streams text.
func (r *run) streamVersion(ctx wf.Context) error {
	if r.version(ctx, "tulip-stream-publishers") != 1 {
		r.refusing = -1
		return nil
	}
	r.refusing = 1
	r.textPieces = map[[2]int]int{}
	if r.in.Stream == nil || !r.in.Stream.Text {
		return nil
	}
	// Random, in this run's history only (a side effect).
	return wf.SideEffect(ctx, func(wf.Context) any {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}).Get(&r.streamToken)
}

// refusePublish says why a batch signalled to the run's stream is not
// the run's own ("" when it is). Only the model activity publishes by
// signal, on tulip.text, under the run's token (activities.PublisherID);
// tulip.calls and everything else come from the workflow itself. Each
// text piece it takes is counted for its turn and attempt (publishAnswer).
func (r *run) refusePublish(in streams.PublishInput) string {
	if r.streamToken == "" {
		return "the run takes no items by signal"
	}
	rest, ok := strings.CutPrefix(in.PublisherID, r.streamToken+"/")
	if !ok {
		return "not the run's publisher"
	}
	var turn, attempt int
	var nonce string
	if n, _ := fmt.Sscanf(strings.ReplaceAll(rest, "/", " "), "%d %d %s", &turn, &attempt, &nonce); n != 3 {
		return "not the run's publisher"
	}
	for _, it := range in.Items {
		if it.Topic != protocol.TopicText {
			return "topic " + it.Topic + " is not the model activity's"
		}
	}
	r.textPieces[[2]int{turn, attempt}] += len(in.Items)
	return ""
}

// publishLine publishes a trace line's decision (workflow code: replay
// publishes it again at the same offset, and no event is added). The item
// is built when it is encoded, for a subscriber: replay builds nothing.
func (r *run) publishLine(l *TraceLine) {
	if r.stream == nil {
		return
	}
	// A pointer in an interface is stored as it is: no allocation a line.
	if r.in.Stream != nil && r.in.Stream.Content {
		r.stream.PublishLazy(protocol.TopicCalls, (*contentItem)(l))
	} else {
		r.stream.PublishLazy(protocol.TopicCalls, (*lineItem)(l))
	}
}

// publishChild publishes a sub-agent's settled calls (lines) under its
// agent path, before the parent's own line for the call that ran it.
func (r *run) publishChild(path string, lines []TraceLine) {
	if r.stream == nil {
		return
	}
	content := r.in.Stream != nil && r.in.Stream.Content
	for i := range lines {
		if lines[i].Outcome == OutcomeHeld {
			continue // its final outcome follows
		}
		r.stream.PublishLazy(protocol.TopicCalls, &childItem{line: &lines[i], agent: path, content: content})
	}
}

// childItem encodes a sub-agent's line as its CallItem.
type childItem struct {
	line    *TraceLine
	agent   string
	content bool
}

// MarshalJSON encodes the line's CallItem, naming the sub-agent.
func (ci *childItem) MarshalJSON() ([]byte, error) {
	it := callItem(ci.line, ci.content)
	it.Agent = ci.agent
	return json.Marshal(it)
}

// lineItem encodes a line of the trace (never changed once added) as its
// CallItem; contentItem as its CallItem with the call's content.
type (
	lineItem    TraceLine
	contentItem TraceLine
)

// MarshalJSON encodes the line's CallItem.
func (li *lineItem) MarshalJSON() ([]byte, error) {
	return json.Marshal(callItem((*TraceLine)(li), false))
}

// MarshalJSON encodes the line's CallItem with content.
func (ci *contentItem) MarshalJSON() ([]byte, error) {
	return json.Marshal(callItem((*TraceLine)(ci), true))
}

func callItem(line *TraceLine, content bool) CallItem {
	l := *line
	it := CallItem{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Outcome: l.Outcome, ServedFrom: l.ServedFrom,
		Relation: l.Relation, Failed: l.Error != nil}
	if l.Key != "" {
		sum := sha256.Sum256([]byte(l.Key))
		it.KeyHash = hex.EncodeToString(sum[:8])
	}
	if nm := l.NearMiss; nm != nil {
		it.NearMiss = &CallNearMiss{Record: nm.Record, Reason: nm.Reason}
		for _, d := range nm.Differences {
			it.NearMiss.Paths = append(it.NearMiss.Paths, d.Path)
		}
	}
	if content {
		it.Error = l.Error
		for _, v := range []struct {
			dst *json.RawMessage
			src json.RawMessage
		}{{&it.Arguments, l.Arguments}, {&it.Result, l.Result}} {
			if len(v.src) > ContentLimit {
				it.CutBytes = max(it.CutBytes, len(v.src))
				continue
			}
			*v.dst = v.src
		}
	}
	return it
}

// publishAnswer publishes the Done item of a model answer: the whole text
// when the model activity did not stream it.
func (r *run) publishAnswer(resp activities.ModelResponse) {
	if r.stream == nil {
		return
	}
	if resp.Text == "" {
		if r.streamOnDemand {
			r.stream.Sync() // a failed attempt's pieces: read, as the coroutine would have
		}
		return
	}
	r.stream.Sync() // the pieces the model activity sent come first
	it := protocol.TextItem{Turn: r.turn, Done: true}
	// A Done item that names pieces the run did not take (an activity
	// that published under no token: a worker older than the token)
	// carries the whole answer instead.
	if s := resp.Streamed; s != nil && (r.textPieces == nil || r.textPieces[[2]int{r.turn, s.Attempt}] >= s.Pieces) {
		it.Attempt, it.Seq = s.Attempt, s.Pieces
	} else {
		it.Delta = resp.Text
	}
	r.stream.PublishLazy(protocol.TopicText, it)
}

// textStream is the model input's TextStream for this run.
func (r *run) textStream() *activities.TextStream {
	if r.stream == nil || r.in.Stream == nil || !r.in.Stream.Text {
		return nil
	}
	return &activities.TextStream{BatchMillis: r.in.Stream.BatchMillis, Publisher: r.streamToken}
}

// StreamGrace is how long a closing run waits for its subscribers to read
// its last items (streams.Stream.Settle): only when some polled within the
// last minute (in this run or the ones it continues) and have not caught
// up.
const StreamGrace = 5 * time.Second

// closeStream drains the stream before the run closes (closing: after its
// subscribers caught up, within StreamGrace) or continues as new (its
// subscribers follow to the next run, which holds the items they have not
// read).
func (r *run) closeStream(ctx wf.Context, closing bool) error {
	if r.stream == nil || r.stream.Draining() {
		return nil
	}
	if closing {
		if err := r.stream.Settle(ctx, StreamGrace); err != nil {
			return err
		}
	}
	return r.stream.Drain(ctx)
}
