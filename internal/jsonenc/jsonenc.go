// Package jsonenc writes JSON as encoding/json's json.Marshal does, byte
// for byte, without reflection: for the values workflow code encodes on
// every call of every replay (a tool call's input, a conversation's
// digest, a run's trace).
package jsonenc

import (
	"encoding/json"
	"unicode/utf8"
)

const hexLower = "0123456789abcdef"

// asIs holds the bytes a JSON string keeps as they are: ASCII from space
// on, but for ", \ and the HTML characters.
var asIs = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// asIsNoHTML is asIs with the HTML characters kept.
var asIsNoHTML = func() (t [256]bool) {
	t = asIs
	t['<'], t['>'], t['&'] = true, true, true
	return t
}()

// AppendString appends s as encoding/json writes a string with HTML
// escaping on (json.Marshal): <, > and & as \u escapes, U+2028 and U+2029
// too, invalid UTF-8 as \ufffd.
func AppendString(b []byte, s string) []byte { return appendString(b, s, &asIs) }

// AppendStringNoHTML appends s as an encoding/json Encoder with HTML
// escaping off writes it: as AppendString, but <, > and & as they are.
func AppendStringNoHTML(b []byte, s string) []byte { return appendString(b, s, &asIsNoHTML) }

func appendString(b []byte, s string, keep *[256]bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if keep[s[i]] {
			i++
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
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

// AppendRaw appends raw as json.Marshal writes a json.RawMessage: null
// when empty, else compacted, with <, >, & and U+2028, U+2029 escaped.
// raw must be valid JSON, as encoding/json requires: the values tulip
// holds raw were parsed or decoded from JSON, or written by it. Most are
// compact and need no escape, and are copied as they are.
func AppendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if !rawNeedsWork(raw) {
		return append(b, raw...)
	}
	inString := false
	start := 0 // raw[start:i] is still to copy, as it is
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++ // an escape: its next byte is ASCII, kept
				continue
			case '"':
				inString = false
				continue
			}
		} else {
			switch c {
			case ' ', '\t', '\n', '\r': // whitespace between tokens: left out
				b = append(b, raw[start:i]...)
				start = i + 1
				continue
			case '"':
				inString = true
				continue
			}
		}
		switch {
		case c == '<' || c == '>' || c == '&':
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexLower[c>>4], hexLower[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9):
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexLower[raw[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(b, raw[start:]...)
}

// rawNeedsWork reports whether json.Marshal would change raw: whitespace
// between tokens, or a character it escapes.
func rawNeedsWork(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch rawClass[raw[i]] {
		case rawPlain:
		case rawHTML:
			return true
		case rawE2:
			if i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9) {
				return true // U+2028, U+2029
			}
		case rawQuote:
			inString = !inString // a quote a string holds is escaped: skipped below
		case rawBackslash:
			if inString {
				i++ // an escape's next byte is ASCII: never one of the above
			}
		case rawSpace:
			if !inString {
				return true
			}
		}
	}
	return false
}

// rawClass sorts the bytes rawNeedsWork looks for; most are rawPlain.
var rawClass = [256]uint8{'<': rawHTML, '>': rawHTML, '&': rawHTML, 0xE2: rawE2, '"': rawQuote, '\\': rawBackslash,
	' ': rawSpace, '\t': rawSpace, '\n': rawSpace, '\r': rawSpace}

const (
	rawPlain = iota
	rawHTML
	rawE2
	rawQuote
	rawBackslash
	rawSpace
)

// AppendRawNoHTML appends raw as an encoding/json Encoder with HTML
// escaping off writes a json.RawMessage: null when empty, else compacted,
// nothing escaped. raw must be valid JSON, as for AppendRaw.
func AppendRawNoHTML(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	inString := false
	start := 0 // raw[start:i] is still to copy, as it is
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inString:
			if c == '\\' {
				i++ // an escape's next byte is ASCII, kept
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r': // whitespace between tokens: left out
			b = append(b, raw[start:i]...)
			start = i + 1
		}
	}
	return append(b, raw[start:]...)
}
