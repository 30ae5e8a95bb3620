package agentrun

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/jsonenc"
)

// A run's result holds its whole trace, encoded once a replay. Its JSON
// is json.Marshal's, byte for byte (TestResultJSON): the trace lines are
// written without reflection, the rest by encoding/json.

// encodeResult is json.Marshal(res). lines, when not nil, is the
// encoding of res.Trace, made already.
func encodeResult(res RunResult, lines []byte) ([]byte, error) {
	trace := res.Trace
	res.Trace = nil
	head, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if trace == nil {
		return head, nil
	}
	if lines == nil {
		lines = encodeLines(trace)
	}
	// "trace" follows fields whose encoded strings escape every quote:
	// its first occurrence is the field.
	at := bytes.Index(head, []byte(`"trace":null`)) + len(`"trace":`)
	n, total := len(lines), len(head)-len("null")+len(lines)
	if cap(lines) < total {
		b := make([]byte, 0, total)
		b = append(b, head[:at]...)
		b = append(b, lines...)
		return append(b, head[at+len("null"):]...), nil
	}
	// In place: the lines move up to make room for what comes before
	// them (encodeLines leaves room).
	b := lines[:total]
	copy(b[at:], lines[:n])
	copy(b, head[:at])
	copy(b[at+n:], head[at+len("null"):])
	return b, nil
}

// encodeLines is json.Marshal(lines) (lines not nil), with room after it
// for the rest of a result (encodeResult), which most results fit.
func encodeLines(lines []TraceLine) []byte {
	size := 2 + 2048
	for i := range lines {
		l := &lines[i]
		// Most lines need no escape: their members' names and texts.
		size += 160 + len(l.CallID) + len(l.Tool) + len(l.Arguments) + len(l.Result) + len(l.Key)
		if l.NearMiss != nil {
			size += 96 + 64*len(l.NearMiss.Differences)
		}
		if l.Unknown != nil {
			size += 96 + len(l.Unknown.Cause)
		}
	}
	return appendTraceLines(make([]byte, 0, size), lines)
}

// appendTraceLines appends json.Marshal(lines) (lines not nil).
func appendTraceLines(b []byte, lines []TraceLine) []byte {
	b = append(b, '[')
	for i := range lines {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTraceLine(b, &lines[i])
	}
	return append(b, ']')
}

// appendTraceLine appends json.Marshal(*l).
func appendTraceLine(b []byte, l *TraceLine) []byte {
	b = append(b, `{"turn":`...)
	b = strconv.AppendInt(b, int64(l.Turn), 10)
	b = append(b, `,"call_id":`...)
	b = jsonenc.AppendString(b, l.CallID)
	b = append(b, `,"tool":`...)
	b = jsonenc.AppendString(b, l.Tool)
	b = append(b, `,"arguments":`...)
	b = jsonenc.AppendRaw(b, l.Arguments)
	b = append(b, `,"outcome":`...)
	b = jsonenc.AppendString(b, string(l.Outcome))
	b = append(b, `,"result":`...)
	b = jsonenc.AppendRaw(b, l.Result)
	b = append(b, `,"error":`...)
	if l.Error == nil {
		b = append(b, "null"...)
	} else {
		b = jsonenc.AppendString(b, *l.Error)
	}
	if l.ServedFrom != nil {
		b = append(b, `,"served_from":`...)
		b = strconv.AppendInt(b, int64(*l.ServedFrom), 10)
	}
	if l.Relation != "" {
		b = append(b, `,"relation":`...)
		b = jsonenc.AppendString(b, string(l.Relation))
	}
	if l.Key != "" {
		b = append(b, `,"key":`...)
		b = jsonenc.AppendString(b, l.Key)
	}
	if l.ResultIn != nil {
		b = append(b, `,"result_in":`...)
		b = strconv.AppendInt(b, int64(*l.ResultIn), 10)
	}
	if l.NearMiss != nil {
		b = append(b, `,"near_miss":`...)
		b = dedup.AppendNearMiss(b, l.NearMiss, true)
	}
	if l.Unknown != nil {
		// Rare (a call whose outcome was unknown): encoding/json's bytes.
		u, _ := json.Marshal(l.Unknown)
		b = append(b, `,"unknown":`...)
		b = append(b, u...)
	}
	return append(b, '}')
}

// encodeContinued is json.Marshal(in) for a continue-as-new input: the
// agents' log snapshots it carries (most of it) are written by
// jsonenc.AppendRaw, which copies what needs no escape, where
// encoding/json would check and compact each again. Each is marked in
// the encoding by a placeholder found once, else the input is encoded by
// json.Marshal alone. The bytes are json.Marshal's either way: the size
// checks see what they saw.
func encodeContinued(in RunInput) ([]byte, error) {
	c := in.Continued
	if c == nil || c.State == nil || len(c.State.Agents) == 0 {
		return json.Marshal(in)
	}
	agents := c.State.Agents
	names := slices.Sorted(maps.Keys(agents))
	marks := make(map[string]json.RawMessage, len(agents))
	size := 0
	for i, name := range names {
		marks[name] = json.RawMessage(`"\u0000tulip-snapshot-` + strconv.Itoa(i) + `"`)
		size += len(agents[name])
	}
	st, cc := *c.State, *c
	st.Agents, cc.State = marks, &st
	marked := in
	marked.Continued = &cc
	head, err := json.Marshal(marked)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(head)+size)
	rest := head
	for _, name := range names { // encoding/json writes a map's keys sorted
		mark := marks[name]
		at := bytes.Index(rest, mark)
		if at < 0 || bytes.Contains(rest[at+len(mark):], mark) {
			return json.Marshal(in)
		}
		b = append(b, rest[:at]...)
		b = jsonenc.AppendRaw(b, agents[name])
		rest = rest[at+len(mark):]
	}
	return append(b, rest...), nil
}
