package dedup

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustParse(t testing.TB, s string) *Args {
	t.Helper()
	a, err := Parse(s, Limits{})
	require.NoError(t, err, s)
	return a
}

// TestRelations shows each comparison rule of docs/rules.md on a pair of argument
// texts: whether they are equal by value (earlier turns) and by sorted-key
// JSON (same response).
func TestRelations(t *testing.T) {
	cases := []struct {
		rule       string
		a, b       string
		value, skj bool
	}{
		{"identical text", `{"order_id": "ord-4821", "amount": 120.0}`, `{"order_id": "ord-4821", "amount": 120.0}`, true, true},
		{"key order is irrelevant (value)", `{"order_id": "o", "amount": 5}`, `{"amount": 5, "order_id": "o"}`, true, true},
		{"layout is irrelevant", `{"a":1,"b":[1,2]}`, "{ \"b\" : [ 1 , 2 ] ,\n \"a\" : 1 }", true, true},
		{"120 equals 120.0 by value, not by sorted-key JSON", `{"x": 120}`, `{"x": 120.0}`, true, false},
		{"1E2 equals 100 by value", `{"x": 1E2}`, `{"x": 100}`, true, false},
		{"1e2 equals 100.0 in sorted-key JSON", `{"x": 1e2}`, `{"x": 100.0}`, true, true},
		{"100 differs from 1e2 in sorted-key JSON", `{"x": 100}`, `{"x": 1e2}`, true, false},
		{"big ints are exact: 2^53+1 != 2^53", `{"x": 9007199254740993}`, `{"x": 9007199254740992}`, false, false},
		{"big ints are exact: 2^53+1 != 2^53 as float", `{"x": 9007199254740993}`, `{"x": 9007199254740992.0}`, false, false},
		{"2^53 equals 2^53.0 by value", `{"x": 9007199254740992}`, `{"x": 9007199254740992.0}`, true, false},
		{"huge ints compare by digits", `{"x": 123456789012345678901234567890}`, `{"x": 123456789012345678901234567890}`, true, true},
		{"huge ints differ in one digit", `{"x": 123456789012345678901234567890}`, `{"x": 123456789012345678901234567891}`, false, false},
		{"1e400 is infinity both ways", `{"x": 1e400}`, `{"x": 2e400}`, true, true},
		{"-0 equals 0", `{"x": -0}`, `{"x": 0}`, true, true},
		{"-0.0 equals 0 by value, not in sorted-key JSON", `{"x": -0.0}`, `{"x": 0.0}`, true, false},
		{"0.1 is a float", `{"x": 0.1}`, `{"x": 0.10}`, true, true},
		{"true is not 1", `{"x": true}`, `{"x": 1}`, false, false},
		{"\"120\" is not 120", `{"x": "120"}`, `{"x": 120}`, false, false},
		{"null is not an absent key", `{"x": null}`, `{}`, false, false},
		{"omitted default differs", `{"service": "api", "version": "1.2"}`, `{"service": "api", "version": "1.2", "canary": false}`, false, false},
		{"strings compare after unescaping", `{"x": "\u00e9"}`, `{"x": "é"}`, true, true},
		{"no unicode normalisation", `{"x": "\u00e9"}`, `{"x": "e\u0301"}`, false, false},
		{"escaped slash", `{"x": "a\/b"}`, `{"x": "a/b"}`, true, true},
		{"surrogate pair is one code point", `{"x": "\ud83d\ude00"}`, `{"x": "😀"}`, true, true},
		{"lone surrogate is not U+FFFD", `{"x": "\ud800"}`, `{"x": "\ufffd"}`, false, false},
		{"arrays keep order", `{"x": [1, 2]}`, `{"x": [2, 1]}`, false, false},
		{"arrays compare element-wise by value", `{"x": [1, 2.0]}`, `{"x": [1.0, 2]}`, true, false},
		{"nested objects ignore key order", `{"x": {"a": 1, "b": 2}}`, `{"x": {"b": 2, "a": 1}}`, true, true},
		{"duplicate key: last wins", `{"x": 1, "x": 2}`, `{"x": 2}`, true, true},
		{"different lengths", `{"x": [1]}`, `{"x": [1, 1]}`, false, false},
		{"different key sets", `{"a": 1}`, `{"b": 1}`, false, false},
		{"empty objects", `{}`, ` { } `, true, true},
		{"string vs array", `{"x": "a"}`, `{"x": ["a"]}`, false, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			a, b := mustParse(t, c.a), mustParse(t, c.b)
			assert.Equal(t, c.value, a.ValueEqual(b), "value equality")
			assert.Equal(t, c.value, b.ValueEqual(a), "value equality is symmetric")
			assert.Equal(t, c.value, a.ValueKey() == b.ValueKey(), "value key agrees with Equal")
			assert.Equal(t, c.skj, a.SortedKeyEqual(b), "sorted-key JSON")
			if c.skj {
				assert.True(t, c.value, "sorted-key JSON equality implies value equality")
			}
		})
	}
}

// TestSortedKeyJSONIsPythons pins the encoding to json.dumps(sort_keys=True).
func TestSortedKeyJSONIsPythons(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"order_id": "ord-4821", "amount": 120.0}`, `{"amount": 120.0, "order_id": "ord-4821"}`},
		{`{"b":1,"a":[true,false,null]}`, `{"a": [true, false, null], "b": 1}`},
		{`{"x": 1e2}`, `{"x": 100.0}`},
		{`{"x": 1e16}`, `{"x": 1e+16}`},
		{`{"x": 1e15}`, `{"x": 1000000000000000.0}`},
		{`{"x": 0.0001}`, `{"x": 0.0001}`},
		{`{"x": 0.00001}`, `{"x": 1e-05}`},
		{`{"x": 1.5e-7}`, `{"x": 1.5e-07}`},
		{`{"x": 123.456}`, `{"x": 123.456}`},
		{`{"x": -2.5E3}`, `{"x": -2500.0}`},
		{`{"x": 1e999}`, `{"x": Infinity}`},
		{`{"x": -0.0}`, `{"x": -0.0}`},
		{`{"x": -0}`, `{"x": 0}`},
		{`{"x": "é\n\"\u0001"}`, `{"x": "\u00e9\n\"\u0001"}`},
		{`{"x": "😀"}`, `{"x": "\ud83d\ude00"}`},
		{`{"x": "\udc00"}`, `{"x": "\udc00"}`},
		{`{"é": 1, "z": 2, "a": 3}`, `{"a": 3, "z": 2, "\u00e9": 1}`},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, mustParse(t, c.in).SortedKeyJSON(), c.in)
	}
}

// TestRejection covers rule 1: what cannot be a call is refused with a
// typed error that says what and where.
func TestRejection(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65)
	ok64 := strings.Repeat(`{"a":`, 63) + "{}" + strings.Repeat("}", 63)
	deepArr := `{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + "}"
	big := `{"x": "` + strings.Repeat("a", DefaultMaxBytes) + `"}`
	cases := []struct {
		name, text, reason string
		offset             int
	}{
		{"truncated", `{"order_id": "ord-1", "amount": `, ReasonInvalidJSON, 32},
		{"empty text", ``, ReasonInvalidJSON, 0},
		{"only spaces", `   `, ReasonInvalidJSON, 3},
		{"single quotes", `{'a': 1}`, ReasonInvalidJSON, 1},
		{"trailing comma", `{"a": 1,}`, ReasonInvalidJSON, 8},
		{"NaN literal", `{"a": NaN}`, ReasonInvalidJSON, 6},
		{"Infinity literal", `{"a": Infinity}`, ReasonInvalidJSON, 6},
		{"leading zero", `{"a": 01}`, ReasonInvalidJSON, 7},
		{"bad escape", `{"a": "\x"}`, ReasonInvalidJSON, 8},
		{"raw newline in string", "{\"a\": \"x\ny\"}", ReasonInvalidJSON, 8},
		{"invalid UTF-8", "{\"a\": \"\xff\"}", ReasonInvalidJSON, 7},
		{"trailing data", `{"a": 1} {"b": 2}`, ReasonTrailingData, 9},
		{"trailing garbage", `{"a": 1}x`, ReasonTrailingData, 8},
		{"array is not an object", `[1, 2]`, ReasonNotObject, 0},
		{"string is not an object", `"hi"`, ReasonNotObject, 0},
		{"number is not an object", ` 42`, ReasonNotObject, 1},
		{"null is not an object", `null`, ReasonNotObject, 0},
		{"65 levels", deep, ReasonTooDeep, 320},
		{"65 levels of arrays", deepArr, ReasonTooDeep, 68},
		{"over 256 KiB", big, ReasonTooLarge, DefaultMaxBytes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.text, Limits{})
			var ae *ArgumentError
			require.True(t, errors.As(err, &ae), "want *ArgumentError, got %v", err)
			assert.Equal(t, c.reason, ae.Reason)
			assert.Equal(t, c.offset, ae.Offset, ae.Error())
		})
	}
	_, err := Parse(ok64, Limits{})
	assert.NoError(t, err, "64 levels are accepted")
	_, err = Parse(deep, Limits{MaxDepth: 100})
	assert.NoError(t, err, "the depth limit is an option")
	_, err = Parse(`{"x": "12345"}`, Limits{MaxBytes: 10})
	assert.Error(t, err, "the size limit is an option")
}

func TestHugeNestingDoesNotRecurseUnbounded(t *testing.T) {
	text := strings.Repeat("[", 1<<20)
	_, err := Parse(`{"a":`+text, Limits{MaxDepth: 1 << 30, MaxBytes: 1 << 30})
	var ae *ArgumentError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, ReasonTooDeep, ae.Reason, "MaxDepth is capped")
}

func TestCompactJSONRoundTrips(t *testing.T) {
	for _, s := range []string{
		`{"order_id":"ord-4821","amount":120.0}`,
		`{"x":[1,2.50,-0,1E+2,null,true,false,{}],"y":"\u00e9\ud800\n"}`,
		`{"b":1,"a":2}`,
	} {
		a := mustParse(t, s)
		b := mustParse(t, a.Value().JSON())
		assert.Equal(t, a.SortedKeyJSON(), b.SortedKeyJSON())
		assert.Equal(t, a.ValueKey(), b.ValueKey())
	}
}

func TestHookRewriteDoesNotTouchOriginal(t *testing.T) {
	a := mustParse(t, `{"order_id": "ord-7", "amount": 5}`)
	v := a.Value().Clone()
	v.Set("order_id", StringValue("ORD-7"))
	b := NewArgs(v)
	assert.Equal(t, `{"order_id":"ORD-7","amount":5}`, b.Text())
	assert.Equal(t, "ord-7", a.Value().Get("order_id").Str())
}
