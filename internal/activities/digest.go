package activities

import (
	"strconv"
	"unicode/utf8"
)

// appendMessageJSON appends what json.Marshal(m) returns, byte for byte,
// without reflection: ExtendDigest hashes every message of every
// conversation (workflow code, on every replay too). TestMessageJSON
// holds it to json.Marshal.
func appendMessageJSON(b []byte, m *Message) []byte {
	b = append(b, `{"role":`...)
	b = appendJSONString(b, m.Role)
	if m.Content != "" {
		b = append(b, `,"content":`...)
		b = appendJSONString(b, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, c.ID)
			b = append(b, `,"name":`...)
			b = appendJSONString(b, c.Name)
			b = append(b, `,"arguments":`...)
			b = appendJSONString(b, c.Arguments)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendJSONString(b, m.ToolCallID)
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

const hexLower = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping on (json.Marshal): <, > and & as \u escapes, U+2028 and U+2029
// too, invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexLower[c>>4], hexLower[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexLower[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
