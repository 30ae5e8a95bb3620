package workflow

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/dedup"
)

// Lower bounds of JSON sizes. The state a run hands on goes in full or by
// reference by its encoded size (handover, the trace in continueByRef and
// view); when a bound computed from the lengths of the texts it holds is
// already past the limit, the encoding it would take to know is not made.
// Each bound only counts what the encoding surely writes: the members
// always written (with their shortest values), a string's bytes and its
// quotes (escapes only add), a raw message's bytes other than whitespace
// (encoding compacts it: whitespace outside its strings goes, nothing else
// does), and a member left out when empty only when it is not.

func skeleton(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return len(b)
}

var (
	minRecord   = skeleton(dedup.Record{})
	minMessage  = skeleton(activities.Message{})
	minToolCall = skeleton(activities.ToolCall{})
	empty       = ""
	minLine     = skeleton(TraceLine{Arguments: json.RawMessage("0"), Result: json.RawMessage("0"), Error: &empty})
)

// member is the least an omitempty string member adds when it is set:
// ,"name":"value".
func member(name, v string) int {
	if v == "" {
		return 0
	}
	return len(name) + 6 + len(v)
}

// rawMin is the least a raw JSON value encodes to: its bytes other than
// whitespace.
func rawMin(b json.RawMessage) int {
	n := 0
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			n++
		}
	}
	return n
}

func messageMin(m *activities.Message) int {
	n := minMessage + len(m.Role) + member("content", m.Content) + member("tool_call_id", m.ToolCallID)
	if len(m.ToolCalls) > 0 {
		n += len(`,"tool_calls":[]`) + len(m.ToolCalls) - 1
		for _, c := range m.ToolCalls {
			n += minToolCall + len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	return n
}

func lineMin(l *TraceLine) int {
	n := minLine + len(l.CallID) + len(l.Tool) + len(l.Outcome) + rawMin(l.Arguments) + rawMin(l.Result) + member("key", l.Key)
	if l.Error != nil {
		n += len(*l.Error)
	}
	return n
}

// linesOver reports whether lines surely encode to more than limit bytes
// (false: they may not).
func linesOver(lines []TraceLine, limit int) bool {
	n := 2 + len(lines) - 1
	for i := range lines {
		if n += lineMin(&lines[i]); n > limit {
			return true
		}
	}
	return false
}

// fullStateOver reports whether the state in full (refState(settledOnly,
// true)) surely encodes to more than limit bytes, so that handover would
// take the state by reference: this agent's records and the messages
// this run holds. False also when a record holds argument text the full
// state could not encode (it fails on it, as it did).
func (r *run) fullStateOver(settledOnly bool, limit int) bool {
	n := r.log.Len()
	if settledOnly {
		n = r.log.Settled()
	}
	size := 0
	for i := range n {
		rec := r.log.At(i)
		if !utf8.ValidString(rec.Arguments) {
			return false
		}
		size += minRecord + 1 + len(rec.Tool) + len(rec.Arguments) + len(rec.CallID) + len(rec.Origin) +
			member("run", rec.Run) + member("key", rec.Key) + member("args_hash", rec.ArgsHash) + member("holder", rec.Holder)
	}
	for i := range r.messages {
		size += messageMin(&r.messages[i]) + 1
	}
	return size > limit
}
