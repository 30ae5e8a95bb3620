package agentrun

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
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
	minMessage  = skeleton(threadstate.Message{})
	minToolCall = skeleton(threadstate.ToolCall{})
	minLine     = skeleton(TraceLine{}) - 3*len("null") // without arguments, result and error (always written: lineMin adds them)
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

func messageMin(m *threadstate.Message) int {
	n := minMessage + len(m.Role) + member("content", m.Content) + member("tool_call_id", m.ToolCallID)
	if len(m.ToolCalls) > 0 {
		n += len(`,"tool_calls":[]`) + len(m.ToolCalls) - 1
		for _, c := range m.ToolCalls {
			n += minToolCall + len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	return n
}

// messageMax bounds len(json.Marshal(*m)) from its texts' lengths alone:
// a byte encodes as at most 6 (\u00XX), a member's name and punctuation
// within 32.
func messageMax(m *threadstate.Message) int {
	n := 96 + 6*(len(m.Role)+len(m.Content)+len(m.ToolCallID))
	for _, c := range m.ToolCalls {
		n += 64 + 6*(len(c.ID)+len(c.Name)+len(c.Arguments))
	}
	if m.ContentIn != nil {
		n += 48
	}
	return n
}

func lineMin(l *TraceLine) int {
	n := minLine + len(l.CallID) + len(l.Tool) + len(l.Outcome) + rawOrNull(l.Arguments) + rawOrNull(l.Result) + member("key", l.Key)
	if l.Error != nil {
		n += 2 + len(*l.Error)
	} else {
		n += len("null")
	}
	if nm := l.NearMiss; nm != nil {
		n += len(`,"near_miss":{"record":0,"call_id":"","reason":""}`) + len(nm.CallID) + len(nm.Reason)
		if len(nm.Differences) > 0 {
			n += len(`,"differences":[]`) + len(nm.Differences) - 1
			for _, d := range nm.Differences {
				n += len(`{"path":""}`) + len(d.Path) + rawMember("was", d.Was) + rawMember("now", d.Now)
			}
		}
		if nm.Distance != 0 {
			n += len(`,"distance":0`)
		}
	}
	if u := l.Unknown; u != nil {
		n += len(`,"unknown":{"cause":"","checks":0,"resolution":""}`) + len(u.Cause) + len(u.Resolution)
		if u.Retries != 0 {
			n += len(`,"retries":0`)
		}
		if u.Holds != 0 {
			n += len(`,"holds":0`)
		}
	}
	return n
}

// rawOrNull is the least a raw member always written adds: null when
// empty, else its bytes other than whitespace.
func rawOrNull(v json.RawMessage) int {
	if len(v) == 0 {
		return len("null")
	}
	return rawMin(v)
}

// rawMember is the least an omitempty raw member adds when it is set.
func rawMember(name string, v json.RawMessage) int {
	if len(v) == 0 {
		return 0
	}
	return len(name) + 4 + rawMin(v)
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

// Upper bounds, the other way round: when a bound computed from the texts
// is within the limit, the encoding is too. A string encodes to at most
// its escaped length (strMax), a raw message to its bytes and the escapes
// encoding adds to them (compacting only removes), a number to 20 bytes,
// and every member is counted as written.

// strMax is the length of s as encoding/json writes it (HTML escaping on).
func strMax(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		if e := strExtra[s[i]]; e != 0 {
			if e != nonASCII {
				n += int(e)
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
				n += 6 - size
			}
			i += size - 1
		}
	}
	return n
}

// strExtra is what encoding/json writes for an ASCII byte beyond the byte
// itself: 1 for a two-byte escape, 5 for a \u escape. nonASCII marks the
// bytes that begin (or continue) a multi-byte rune.
var strExtra = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 5
	}
	for _, c := range "\"\\\b\f\n\r\t" {
		t[c] = 1
	}
	for _, c := range "<>&" {
		t[c] = 5
	}
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = nonASCII
	}
	return t
}()

const nonASCII = 0xFF

// rawMax bounds what a raw JSON value encodes to: null when empty, else
// its bytes with <, > and & as \u escapes (5 more each) and U+2028/9 too
// (3 more each).
func rawMax(b json.RawMessage) int {
	if len(b) == 0 {
		return 4
	}
	n := len(b)
	for i, c := range b {
		switch c {
		case '<', '>', '&':
			n += 5
		case 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
				n += 3
			}
		}
	}
	return n
}

const (
	numMax      = 20 // -9223372036854775808
	lineMembers = len(`{"turn":,"call_id":,"tool":,"arguments":,"outcome":,"result":,"error":,"served_from":,"relation":,"key":,"result_in":,"near_miss":}`)
	uMembers    = len(`,"unknown":{"cause":,"checks":,"retries":,"holds":,"resolution":}`)
	nmMembers   = len(`{"record":,"call_id":,"reason":,"differences":[],"distance":}`)
	diffMembers = len(`{"path":,"was":,"now":},`)
)

func lineMax(l *TraceLine) int {
	n := lineMembers + 4*numMax + strMax(l.CallID) + strMax(l.Tool) + rawMax(l.Arguments) + strMax(string(l.Outcome)) +
		rawMax(l.Result) + 4 + strMax(string(l.Relation)) + strMax(l.Key)
	if l.Error != nil {
		n += strMax(*l.Error)
	}
	if nm := l.NearMiss; nm != nil {
		n += nmMembers + 2*numMax + strMax(nm.CallID) + strMax(string(nm.Reason))
		for _, d := range nm.Differences {
			n += diffMembers + strMax(d.Path) + rawMax(d.Was) + rawMax(d.Now)
		}
	}
	if u := l.Unknown; u != nil {
		n += uMembers + 3*numMax + strMax(u.Cause) + strMax(u.Resolution)
	}
	return n
}

// linesUnder reports whether lines surely encode to at most limit bytes
// (false: they may not).
func linesUnder(lines []TraceLine, limit int) bool {
	n := 2 + len(lines)
	for i := range lines {
		n += lineMax(&lines[i])
		if n > limit {
			return false
		}
	}
	return n <= limit
}

// linesOverLimit is jsonSize(lines) > limit, encoding lines only when the
// bounds leave it open.
func linesOverLimit(lines []TraceLine, limit int) bool {
	switch {
	case linesUnder(lines, limit):
		return false
	case linesOver(lines, limit):
		return true
	}
	return len(appendTraceLines(nil, lines)) > limit
}
