package dedup

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Default limits of docs/rules.md, used where a Limits field is zero.
const (
	DefaultMaxDepth = 64
	DefaultMaxBytes = 256 << 10
	// maxDepthCap bounds recursion whatever MaxDepth says.
	maxDepthCap = 10000
)

// Limits bound what Parse accepts. The zero value means the defaults: 64
// levels of nesting and 256 KiB of argument text.
type Limits struct {
	// MaxDepth is the deepest nesting accepted; the top-level object is
	// depth 1. Zero means DefaultMaxDepth; values above 10000 are capped.
	MaxDepth int
	// MaxBytes is the longest argument text accepted, in bytes. Zero means
	// DefaultMaxBytes.
	MaxBytes int
}

func (l Limits) depth() int {
	switch {
	case l.MaxDepth <= 0:
		return DefaultMaxDepth
	case l.MaxDepth > maxDepthCap:
		return maxDepthCap
	}
	return l.MaxDepth
}

func (l Limits) bytes() int {
	if l.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return l.MaxBytes
}

// Reasons an argument text is rejected (ArgumentError.Reason).
const (
	ReasonInvalidJSON  = "invalid_json"
	ReasonTrailingData = "trailing_data"
	ReasonNotObject    = "not_object"
	ReasonTooDeep      = "too_deep"
	ReasonTooLarge     = "too_large"
)

// ArgumentError says why a tool call's argument text was rejected, and where.
// Rejection happens before hooks and matching; a rejected call is never
// recorded.
type ArgumentError struct {
	Reason string // one of the Reason constants
	Offset int    // byte offset in the argument text where the problem is
	Detail string // human-readable detail
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("arguments rejected (%s) at byte %d: %s", e.Reason, e.Offset, e.Detail)
}

// Parse parses a tool call's argument text (the model's JSON string) under
// lim. It never panics and never recurses deeper than the depth limit.
func Parse(text string, lim Limits) (*Args, error) {
	if len(text) > lim.bytes() {
		return nil, &ArgumentError{Reason: ReasonTooLarge, Offset: lim.bytes(),
			Detail: fmt.Sprintf("argument text is %d bytes, over the limit of %d", len(text), lim.bytes())}
	}
	p := parser{s: text, maxDepth: lim.depth()}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] != '{' {
		start := p.i
		if _, err := p.value(1); err != nil {
			return nil, err
		}
		return nil, &ArgumentError{Reason: ReasonNotObject, Offset: start, Detail: "arguments must be a JSON object"}
	}
	v, err := p.value(1)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, &ArgumentError{Reason: ReasonTrailingData, Offset: p.i, Detail: "data after the JSON object"}
	}
	return &Args{text: text, val: v}, nil
}

// ParseValue parses any JSON value (not only an object) under lim.
func ParseValue(text string, lim Limits) (Value, error) {
	if len(text) > lim.bytes() {
		return Value{}, &ArgumentError{Reason: ReasonTooLarge, Offset: lim.bytes(), Detail: "text over the size limit"}
	}
	p := parser{s: text, maxDepth: lim.depth()}
	p.ws()
	v, err := p.value(1)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return Value{}, &ArgumentError{Reason: ReasonTrailingData, Offset: p.i, Detail: "data after the JSON value"}
	}
	return v, nil
}

type parser struct {
	s        string
	i        int
	maxDepth int
}

func (p *parser) fail(detail string) error {
	return &ArgumentError{Reason: ReasonInvalidJSON, Offset: p.i, Detail: detail}
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if p.i >= len(p.s) {
		return Value{}, p.fail("unexpected end of text")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return Value{kind: String, lit: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return Value{kind: Bool, b: true}, p.word("true")
	case c == 'f':
		return Value{kind: Bool}, p.word("false")
	case c == 'n':
		return Value{kind: Null}, p.word("null")
	default:
		return Value{}, p.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) word(w string) error {
	if len(p.s)-p.i < len(w) || p.s[p.i:p.i+len(w)] != w {
		return p.fail("invalid literal")
	}
	p.i += len(w)
	return nil
}

func (p *parser) tooDeep() error {
	return &ArgumentError{Reason: ReasonTooDeep, Offset: p.i,
		Detail: fmt.Sprintf("nesting deeper than %d levels", p.maxDepth)}
}

func (p *parser) object(depth int) (Value, error) {
	if depth > p.maxDepth {
		return Value{}, p.tooDeep()
	}
	p.i++ // '{'
	v := Value{kind: Object}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	// Members gather on the stack and are copied once, to their size:
	// every call's arguments are parsed, on every replay too.
	var room [8]Member
	members := room[:0]
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, p.fail("expected a string key")
		}
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, p.fail("expected ':'")
		}
		p.i++
		p.ws()
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		members = setMember(members, key, val) // a repeated key: the last value wins, as in json.loads
		p.ws()
		if p.i >= len(p.s) {
			return Value{}, p.fail("unexpected end of text in object")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			v.obj = slices.Clone(members)
			return v, nil
		default:
			return Value{}, p.fail("expected ',' or '}'")
		}
	}
}

// setMember is Value.Set on an object's members.
func setMember(members []Member, key string, val Value) []Member {
	for i := range members {
		if members[i].Key == key {
			members[i].Value = val
			return members
		}
	}
	return append(members, Member{Key: key, Value: val})
}

func (p *parser) array(depth int) (Value, error) {
	if depth > p.maxDepth {
		return Value{}, p.tooDeep()
	}
	p.i++ // '['
	v := Value{kind: Array}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		p.ws()
		el, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.arr = append(v.arr, el)
		p.ws()
		if p.i >= len(p.s) {
			return Value{}, p.fail("unexpected end of text in array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return Value{}, p.fail("expected ',' or ']'")
		}
	}
}

func (p *parser) number() (Value, error) {
	start := p.i
	isFloat := false
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
	default:
		return Value{}, p.fail("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		isFloat = true
		p.i++
		if p.i >= len(p.s) || p.s[p.i] < '0' || p.s[p.i] > '9' {
			return Value{}, p.fail("digit expected after '.'")
		}
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		isFloat = true
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.i >= len(p.s) || p.s[p.i] < '0' || p.s[p.i] > '9' {
			return Value{}, p.fail("digit expected in exponent")
		}
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
	}
	lit := p.s[start:p.i]
	if !isFloat {
		return Value{kind: Int, lit: lit}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(f, 0) { // overflow reads as ±inf, as in Python
		return Value{}, &ArgumentError{Reason: ReasonInvalidJSON, Offset: start, Detail: "invalid number"}
	}
	return Value{kind: Float, lit: lit, f: f}, nil
}

// str parses a JSON string at p.i (which is '"') and returns it unescaped.
func (p *parser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes, all ASCII printable.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		p.i++
	}
	buf := []byte(p.s[start:p.i])
	for {
		if p.i >= len(p.s) {
			return "", p.fail("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				return "", p.fail("unterminated escape")
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) && r < 0xDC00 && p.i+6 <= len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					r2, err := p.hex4()
					if err == nil && r2 >= 0xDC00 && r2 <= 0xDFFF {
						r = utf16.DecodeRune(r, r2)
					} else {
						p.i = save
					}
				}
				buf = appendWTF8(buf, r)
			default:
				p.i--
				return "", p.fail(fmt.Sprintf("invalid escape '\\%c'", e))
			}
		case c < 0x80:
			buf = append(buf, c)
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail("argument text is not valid UTF-8")
			}
			buf = append(buf, p.s[p.i:p.i+size]...)
			p.i += size
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, p.fail("short \\u escape")
	}
	var r rune
	for _, c := range []byte(p.s[p.i : p.i+4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, p.fail("invalid \\u escape")
		}
	}
	p.i += 4
	return r, nil
}

// appendWTF8 appends r as UTF-8, encoding a lone surrogate as the three bytes
// UTF-8 would give it (WTF-8), which Go's encoder would replace.
func appendWTF8(buf []byte, r rune) []byte {
	if utf16.IsSurrogate(r) {
		return append(buf, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(buf, r)
}

// decodeWTF8 decodes one code point of s at i, lone surrogates included.
func decodeWTF8(s string, i int) (rune, int) {
	c := s[i]
	if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
		return rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	}
	return utf8.DecodeRuneInString(s[i:])
}
