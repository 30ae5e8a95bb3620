package dedup

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Kind is a JSON value's type. The kinds are distinct under both relations:
// true is not 1 and "120" is not 120.
type Kind uint8

// The JSON kinds. Numbers are Int (spelled without '.', 'e' or 'E') or Float.
const (
	Null Kind = iota
	Bool
	Int
	Float
	String
	Array
	Object
)

var kindNames = [...]string{"null", "bool", "int", "float", "string", "array", "object"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one parsed JSON value. Numbers keep their original spelling, so
// re-encoding never loses a digit; strings are unescaped. Lone surrogates
// from \uD800-style escapes are kept as their three-byte (WTF-8) encoding, so
// "\ud800" stays distinct from "\ufffd".
type Value struct {
	kind Kind
	b    bool
	lit  string  // number literal as written, or the unescaped string
	f    float64 // Float: its float64 value
	arr  []Value
	obj  []Member // source order of first occurrence; a repeated key's last value wins
}

// Member is one key of an object.
type Member struct {
	Key   string
	Value Value
}

// Kind reports the value's kind.
func (v *Value) Kind() Kind { return v.kind }

// Bool returns a Bool value's truth.
func (v *Value) Bool() bool { return v.b }

// Str returns a String value's unescaped text.
func (v *Value) Str() string { return v.lit }

// Literal returns a number's spelling as written in the argument text.
func (v *Value) Literal() string { return v.lit }

// Float64 returns a Float's value, or an Int's nearest float64.
func (v *Value) Float64() float64 {
	if v.kind == Int {
		f, _ := strconv.ParseFloat(v.lit, 64)
		return f
	}
	return v.f
}

// Elems returns an Array's elements.
func (v *Value) Elems() []Value { return v.arr }

// Members returns an Object's members in source order.
func (v *Value) Members() []Member { return v.obj }

// Get returns the member named key of an Object, or nil.
func (v *Value) Get(key string) *Value {
	for i := range v.obj {
		if v.obj[i].Key == key {
			return &v.obj[i].Value
		}
	}
	return nil
}

// StringValue makes a String value.
func StringValue(s string) Value { return Value{kind: String, lit: s} }

// Set replaces (or appends) the member named key of an Object. Hooks use it
// to rewrite arguments.
func (v *Value) Set(key string, val Value) { v.obj = setMember(v.obj, key, val) }

// Clone returns a deep copy, so that a hook's rewrite never touches the
// model's original arguments.
func (v Value) Clone() Value {
	switch v.kind {
	case Array:
		out := make([]Value, len(v.arr))
		for i := range v.arr {
			out[i] = v.arr[i].Clone()
		}
		v.arr = out
	case Object:
		out := make([]Member, len(v.obj))
		for i := range v.obj {
			out[i] = Member{Key: v.obj[i].Key, Value: v.obj[i].Value.Clone()}
		}
		v.obj = out
	}
	return v
}

// Equal reports value equality (the relation for records of earlier turns):
// Python's == on the decoded values, except that JSON kinds are distinct
// (true is not 1). Numbers compare by exact mathematical value, never
// through float64: 120 == 120.0, 9007199254740993 != 9007199254740992.0.
// It is a structural implementation, independent of the canonical key.
func Equal(a, b *Value) bool { return equal(a, b, false) }

// SortedEqual reports sorted-key JSON equality (the relation for earlier
// calls of the same response) structurally: json.dumps(sort_keys=True) of
// both is the same text exactly when kinds match (an int is never a float),
// integers have the same digits, floats the same float64 (so the same
// Python repr: -0.0 is not 0.0), strings the same code points, and
// containers match member by member.
func SortedEqual(a, b *Value) bool { return equal(a, b, true) }

// equal is both relations; they differ only on numbers.
func equal(a, b *Value, sorted bool) bool {
	if !sorted {
		switch {
		case a.kind == Float && b.kind == Float:
			return a.f == b.f
		case a.kind == Int && b.kind == Float:
			return intEqualsFloat(a.lit, b.f)
		case a.kind == Float && b.kind == Int:
			return intEqualsFloat(b.lit, a.f)
		}
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case Null:
		return true
	case Bool:
		return a.b == b.b
	case Int:
		return intDigits(a.lit) == intDigits(b.lit)
	case Float:
		return math.Float64bits(a.f) == math.Float64bits(b.f)
	case String:
		return a.lit == b.lit
	case Array:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !equal(&a.arr[i], &b.arr[i], sorted) {
				return false
			}
		}
		return true
	case Object:
		if len(a.obj) != len(b.obj) {
			return false
		}
		for i := range a.obj {
			bv := b.Get(a.obj[i].Key)
			if bv == nil || !equal(&a.obj[i].Value, bv, sorted) {
				return false
			}
		}
		return true
	}
	return false
}

// intDigits returns an integer literal's canonical digits: "-0" is "0".
func intDigits(lit string) string {
	if lit == "-0" {
		return "0"
	}
	return lit
}

// intEqualsFloat compares an integer literal with a float64 exactly.
func intEqualsFloat(lit string, f float64) bool {
	s, ok := floatIntegerText(f)
	return ok && s == intDigits(lit)
}

// floatIntegerText returns the exact decimal integer a finite, integral
// float64 equals.
func floatIntegerText(f float64) (string, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return "", false
	}
	if f == 0 {
		return "0", true
	}
	if math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10), true
	}
	bi, _ := new(big.Float).SetFloat64(f).Int(nil)
	return bi.String(), true
}

// pythonFloatRepr writes f as Python's repr(float) does (json.dumps uses it):
// the shortest round-tripping digits, positional for exponents in [-4, 16),
// scientific otherwise, and always a '.0' or exponent so it reads as a float.
func pythonFloatRepr(sb keyWriter, f float64) {
	switch {
	case math.IsInf(f, 1):
		sb.WriteString("Infinity")
		return
	case math.IsInf(f, -1):
		sb.WriteString("-Infinity")
		return
	case math.IsNaN(f):
		sb.WriteString("NaN")
		return
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
		sb.WriteByte('-')
	}
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1
	if -4 < decpt && decpt <= 16 {
		switch {
		case decpt <= 0:
			sb.WriteString("0.")
			sb.WriteString(strings.Repeat("0", -decpt))
			sb.WriteString(digits)
		case decpt >= len(digits):
			sb.WriteString(digits)
			sb.WriteString(strings.Repeat("0", decpt-len(digits)))
			sb.WriteString(".0")
		default:
			sb.WriteString(digits[:decpt])
			sb.WriteByte('.')
			sb.WriteString(digits[decpt:])
		}
		return
	}
	sb.WriteByte(digits[0])
	if len(digits) > 1 {
		sb.WriteByte('.')
		sb.WriteString(digits[1:])
	}
	sb.WriteByte('e')
	if exp < 0 {
		sb.WriteByte('-')
		exp = -exp
	} else {
		sb.WriteByte('+')
	}
	if exp < 10 {
		sb.WriteByte('0')
	}
	sb.WriteString(strconv.Itoa(exp))
}
