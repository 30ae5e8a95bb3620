package dedup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Args is a tool call's parsed arguments (a JSON object) with its canonical
// encodings, each computed once.
type Args struct {
	text string
	val  Value

	valueKey, sortedJSON     string
	haveValueKey, haveSorted bool

	hashTool string // the tool the cached hash includes
	vh       uint64
	haveVH   bool

	argsHash string
}

// NewArgs wraps an object Value (for instance one a hook rewrote) as Args.
func NewArgs(v Value) *Args {
	return &Args{val: v}
}

// Value returns the argument object. Callers must not modify it; Clone it
// first.
func (a *Args) Value() *Value { return &a.val }

// Text returns the argument text: the model's original text for parsed
// Args, or the compact encoding for Args made by NewArgs.
func (a *Args) Text() string {
	if a.text == "" {
		a.text = a.val.JSON()
	}
	return a.text
}

// ValueKey is the canonical encoding of value equality: two Args are
// value-equal exactly when their ValueKeys are equal. Integral numbers are
// written as exact integers (120 and 120.0 both as 120), objects with sorted
// keys, strings length-prefixed.
func (a *Args) ValueKey() string {
	if !a.haveValueKey {
		var sb strings.Builder
		sb.Grow(len(a.text) + 16)
		writeValueKey(&sb, &a.val)
		a.valueKey, a.haveValueKey = sb.String(), true
	}
	return a.valueKey
}

// SortedKeyJSON is Python's json.dumps(args, sort_keys=True): the relation
// for earlier calls of the same response, compared as text. Floats are
// written as Python's repr, so 120 and 120.0 differ.
func (a *Args) SortedKeyJSON() string {
	if !a.haveSorted {
		var sb strings.Builder
		sb.Grow(len(a.text) + 16)
		writeSortedJSON(&sb, &a.val)
		a.sortedJSON, a.haveSorted = sb.String(), true
	}
	return a.sortedJSON
}

// ArgsHash is the SHA-256 of ValueKey, in hex: equal exactly when the
// arguments are value-equal (up to SHA-256 collisions). Thin records match
// by it.
func (a *Args) ArgsHash() string {
	if a.argsHash == "" {
		// The key is written into a pooled buffer, not kept: a
		// continue-as-new hashes every record of the run.
		buf := keyBufs.Get().(*bytes.Buffer)
		buf.Reset()
		if a.haveValueKey {
			buf.WriteString(a.valueKey)
		} else {
			writeValueKey(buf, &a.val)
		}
		sum := sha256.Sum256(buf.Bytes())
		keyBufs.Put(buf)
		var hx [2 * sha256.Size]byte
		hex.Encode(hx[:], sum[:])
		a.argsHash = string(hx[:])
	}
	return a.argsHash
}

var keyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ValueEqual reports value equality with b (see Equal).
func (a *Args) ValueEqual(b *Args) bool { return Equal(&a.val, &b.val) }

// SortedKeyEqual reports sorted-key JSON equality with b (see SortedEqual).
func (a *Args) SortedKeyEqual(b *Args) bool { return SortedEqual(&a.val, &b.val) }

var hashSeed = maphash.MakeSeed()

// hasher streams canonical encodings into a hash, so that no encoding is
// ever built as text to be hashed. One is reused per Log.
type hasher struct{ h maphash.Hash }

func newHasher() *hasher {
	hs := &hasher{}
	hs.h.SetSeed(hashSeed)
	return hs
}

func (hs *hasher) start(tool string) {
	hs.h.Reset()
	hs.h.WriteString(tool)
	hs.h.WriteByte(0)
}

// valueHashFor hashes tool and the value-key encoding: consistent with
// value equality. Cached on a.
func (a *Args) valueHashFor(hs *hasher, tool string) uint64 {
	if !a.haveVH || a.hashTool != tool {
		a.resetHashes(tool)
		hs.start(tool)
		if a.haveValueKey {
			hs.h.WriteString(a.valueKey) // the same bytes, written already
		} else {
			writeValueKey(&hs.h, &a.val)
		}
		a.vh, a.haveVH = hs.h.Sum64(), true
	}
	return a.vh
}

func (a *Args) resetHashes(tool string) {
	if a.hashTool != tool {
		a.hashTool, a.haveVH = tool, false
	}
}

// sortedMembers returns obj's members sorted by key, in buf when it fits.
func sortedMembers(obj []Member, buf []*Member) []*Member {
	ms := buf[:0]
	for i := range obj {
		ms = append(ms, &obj[i])
	}
	// Insertion sort: objects are small, and this allocates nothing.
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].Key < ms[j-1].Key; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
	return ms
}

func writeValueKey(sb keyWriter, v *Value) {
	switch v.kind {
	case Null:
		sb.WriteByte('n')
	case Bool:
		if v.b {
			sb.WriteByte('t')
		} else {
			sb.WriteByte('f')
		}
	case Int, Float:
		s, integer := v.numberKey()
		if integer {
			sb.WriteByte('i')
		} else {
			sb.WriteByte('d')
		}
		sb.WriteString(s)
		sb.WriteByte(';')
	case String:
		writeLenString(sb, 's', v.lit)
	case Array:
		sb.WriteByte('[')
		for i := range v.arr {
			writeValueKey(sb, &v.arr[i])
		}
		sb.WriteByte(']')
	case Object:
		sb.WriteByte('{')
		var buf [16]*Member
		for _, m := range sortedMembers(v.obj, buf[:]) {
			writeLenString(sb, 'k', m.Key)
			writeValueKey(sb, &m.Value)
		}
		sb.WriteByte('}')
	}
}

// NumberKey is a number's text in its value key (ValueKey): the
// digits of an integral value however written (120 and 120.0 are
// "120"), else the shortest text of its float64 ("0.5").
func (v *Value) NumberKey() string {
	s, _ := v.numberKey()
	return s
}

// numberKey is NumberKey, and whether the number is integral.
func (v *Value) numberKey() (string, bool) {
	switch v.kind {
	case Int:
		return intDigits(v.lit), true
	case Float:
		if s, ok := floatIntegerText(v.f); ok {
			return s, true
		}
		return strconv.FormatFloat(v.f, 'g', -1, 64), false
	}
	return "", false
}

func writeLenString(sb keyWriter, tag byte, s string) {
	sb.WriteByte(tag)
	sb.WriteString(strconv.Itoa(len(s)))
	sb.WriteByte(':')
	sb.WriteString(s)
}

func writeSortedJSON(sb keyWriter, v *Value) {
	switch v.kind {
	case Null:
		sb.WriteString("null")
	case Bool:
		if v.b {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case Int:
		sb.WriteString(intDigits(v.lit))
	case Float:
		pythonFloatRepr(sb, v.f)
	case String:
		writePythonString(sb, v.lit)
	case Array:
		sb.WriteByte('[')
		for i := range v.arr {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeSortedJSON(sb, &v.arr[i])
		}
		sb.WriteByte(']')
	case Object:
		sb.WriteByte('{')
		var buf [16]*Member
		for i, m := range sortedMembers(v.obj, buf[:]) {
			if i > 0 {
				sb.WriteString(", ")
			}
			writePythonString(sb, m.Key)
			sb.WriteString(": ")
			writeSortedJSON(sb, &m.Value)
		}
		sb.WriteByte('}')
	}
}

// keyWriter is where canonical encodings go: a strings.Builder for the
// text, or a maphash.Hash to hash them without building the text.
type keyWriter interface {
	WriteByte(c byte) error
	WriteString(s string) (int, error)
}

const hexDigits = "0123456789abcdef"

func writeU(sb keyWriter, r rune) {
	sb.WriteString(`\u`)
	sb.WriteByte(hexDigits[r>>12&0xF])
	sb.WriteByte(hexDigits[r>>8&0xF])
	sb.WriteByte(hexDigits[r>>4&0xF])
	sb.WriteByte(hexDigits[r&0xF])
}

// writePythonString writes s as json.dumps does with ensure_ascii=True.
func writePythonString(sb keyWriter, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			j := i
			for j < len(s) && s[j] >= 0x20 && s[j] < utf8.RuneSelf && s[j] != '"' && s[j] != '\\' {
				j++
			}
			if j > i {
				sb.WriteString(s[i:j])
				i = j
				continue
			}
			writeASCII(sb, c)
			i++
			continue
		}
		r, size := decodeWTF8(s, i)
		i += size
		if r > 0xFFFF {
			r -= 0x10000
			writeU(sb, 0xD800+(r>>10))
			writeU(sb, 0xDC00+(r&0x3FF))
		} else {
			writeU(sb, r)
		}
	}
	sb.WriteByte('"')
}

func writeASCII(sb keyWriter, c byte) {
	switch c {
	case '"':
		sb.WriteString(`\"`)
	case '\\':
		sb.WriteString(`\\`)
	case '\n':
		sb.WriteString(`\n`)
	case '\r':
		sb.WriteString(`\r`)
	case '\t':
		sb.WriteString(`\t`)
	case '\b':
		sb.WriteString(`\b`)
	case '\f':
		sb.WriteString(`\f`)
	default:
		if c < 0x20 {
			writeU(sb, rune(c))
		} else {
			sb.WriteByte(c)
		}
	}
}

// JSON returns a compact JSON encoding of v that keeps every number's
// spelling and the members' source order: valid JSON that parses back to an
// identical Value.
func (v *Value) JSON() string {
	var sb strings.Builder
	writeCompact(&sb, v)
	return sb.String()
}

func writeCompact(sb *strings.Builder, v *Value) {
	switch v.kind {
	case Null, Bool, String:
		if v.kind == String {
			writeCompactString(sb, v.lit)
		} else {
			writeSortedJSON(sb, v)
		}
	case Int, Float:
		sb.WriteString(v.lit)
	case Array:
		sb.WriteByte('[')
		for i := range v.arr {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeCompact(sb, &v.arr[i])
		}
		sb.WriteByte(']')
	case Object:
		sb.WriteByte('{')
		for i := range v.obj {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeCompactString(sb, v.obj[i].Key)
			sb.WriteByte(':')
			writeCompact(sb, &v.obj[i].Value)
		}
		sb.WriteByte('}')
	}
}

// writeCompactString keeps non-ASCII text as UTF-8 and escapes only what
// JSON requires, plus lone surrogates (which UTF-8 cannot carry).
func writeCompactString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			writeASCII(sb, c)
			i++
			continue
		}
		r, size := decodeWTF8(s, i)
		if r >= 0xD800 && r <= 0xDFFF {
			writeU(sb, r)
		} else {
			sb.WriteString(s[i : i+size])
		}
		i += size
	}
	sb.WriteByte('"')
}
