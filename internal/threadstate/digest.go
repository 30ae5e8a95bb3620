package threadstate

import (
	"strconv"
	"sync"

	"github.com/tulip-temporal/tulip/internal/jsonenc"
)

// appendMessageJSON appends what json.Marshal(m) returns, byte for byte,
// without reflection: ExtendDigest hashes every message of every
// conversation (workflow code, on every replay too). TestMessageJSON
// holds it to json.Marshal.
func appendMessageJSON(b []byte, m *Message) []byte {
	b = append(b, `{"role":`...)
	b = jsonenc.AppendString(b, m.Role)
	if m.Content != "" {
		b = append(b, `,"content":`...)
		b = jsonenc.AppendString(b, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = jsonenc.AppendString(b, c.ID)
			b = append(b, `,"name":`...)
			b = jsonenc.AppendString(b, c.Name)
			b = append(b, `,"arguments":`...)
			b = jsonenc.AppendString(b, c.Arguments)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = jsonenc.AppendString(b, m.ToolCallID)
	}
	if m.Served {
		b = append(b, `,"served":true`...)
	}
	if m.ContentIn != nil {
		b = append(b, `,"content_in":`...)
		b = strconv.AppendInt(b, int64(*m.ContentIn), 10)
	}
	return append(b, '}')
}

// MessageJSONSize is len(json.Marshal(m)), without reflection.
func MessageJSONSize(m *Message) int {
	bp := jsonBufs.Get().(*[]byte)
	*bp = appendMessageJSON((*bp)[:0], m)
	n := len(*bp)
	jsonBufs.Put(bp)
	return n
}

// jsonBufs are buffers to write a message's JSON into: a response's
// assistant message (its calls) is often kilobytes.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
