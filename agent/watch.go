package agent

import (
	"context"
	"encoding/json"

	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// Event is one item of a run's live stream (docs/protocol.md, "Live
// runs"): a call decided (Call), or a piece of the model's answer (Text).
// Offset numbers the items of the run's continue-as-new chain; Watch from
// Offset+1 resumes after it.
type Event struct {
	Offset int64
	Call   *CallItem
	Text   *TextItem
	// Compaction: the run compacted its model's view of the conversation
	// (docs/context.md).
	Compaction *Compaction
}

// CallItem is a call decision as the stream carries it: its turn, call
// id, tool, outcome, and (when the run streams content) its arguments and
// result.
type CallItem struct {
	// Turn is the model response the call came from; CallID and Tool the
	// call.
	Turn   int    `json:"turn"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Outcome is how it was settled (a held call has a second item once
	// the resume settles it).
	Outcome Outcome `json:"outcome"`
	// ServedFrom and Relation, for a served call (as in TraceLine).
	ServedFrom *int   `json:"served_from,omitempty"`
	Relation   string `json:"relation,omitempty"`
	// KeyHash is the first 16 hex digits of the SHA-256 of the downstream
	// key.
	KeyHash string `json:"key_hash,omitempty"`
	// Failed says the outcome is an error.
	Failed bool `json:"failed,omitempty"`
	// NearMiss, for a call that ran although its tool had records: the
	// record, the reason and the Paths that differ (no values).
	NearMiss *NearMiss `json:"near_miss,omitempty"`
	// Arguments, Result and Error, with StreamOptions.Content.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *string         `json:"error,omitempty"`
	// CutBytes, with Content: the size of an argument or result text left
	// out for being over the limit.
	CutBytes int `json:"cut_bytes,omitempty"`
	// Agent, on a call a sub-agent made (tulip.AgentTool), is its agent
	// path ("support/refunds"); "" for the run's own calls.
	Agent string `json:"agent,omitempty"`
}

// TextItem is a piece of the model's answer: Delta in order by Seq, then
// one item with Done naming the attempt whose answer the run took (keep
// that attempt's pieces; when Done's Delta is set it is the whole answer).
type TextItem struct {
	// Turn is the model response; Attempt the model activity's attempt
	// that sent the piece; Seq the piece's place, from 0.
	Turn    int `json:"turn"`
	Attempt int `json:"attempt"`
	Seq     int `json:"seq"`
	// Delta is the piece of text (the whole answer in a Done item, when
	// set).
	Delta string `json:"delta,omitempty"`
	// Done ends the turn's text.
	Done bool `json:"done,omitempty"`
}

// Watch reads the run's live stream from offset from (0: the oldest item
// kept) and calls fn with each event, in order, until the run's chain
// closes (nil), fn returns an error (that error), or ctx ends. Reading
// adds nothing to the run's history: Watch reads by a query (the stream's
// read query), asked every 20 ms while items come and up to every 500 ms
// while none do, and queries are not recorded (a run of a worker older
// than that query is read by the protocol's poll update: two history
// events per poll that returns). The stream lives in the run: read it
// while the run is open; once it has closed, what a reader had not read
// is read by one more query, which a worker answers by replaying the run
// (a chain closed before Watch is called is not read: Watch returns nil;
// the trace holds every call either way). Items a newer tulip adds that
// this one cannot read are skipped.
func (r *Run) Watch(ctx context.Context, from int64, fn func(Event) error) error {
	return streams.Subscribe(ctx, r.c, r.h.WorkflowID, streams.SubscribeOptions{RunID: r.h.RunID, From: from},
		func(it streams.Item) error {
			ev := Event{Offset: it.Offset}
			switch it.Topic {
			case protocol.TopicCalls:
				ev.Call = &CallItem{}
				if it.Decode(ev.Call) != nil {
					return nil
				}
			case protocol.TopicText:
				ev.Text = &TextItem{}
				if it.Decode(ev.Text) != nil {
					return nil
				}
			case protocol.TopicContext:
				ev.Compaction = &Compaction{}
				if it.Decode(ev.Compaction) != nil {
					return nil
				}
			default:
				return nil
			}
			return fn(ev)
		})
}
