package jsonenc

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pieces are texts with every escape encoding/json writes.
var pieces = []string{"", "a", "hello world", `"`, `\`, "\b\f\n\r\t", "\x00\x01\x1f", "<script>&</script>", "\u2028\u2029",
	"é", "日本", "😀", "\xff", "\xed\xa0\x80", "\xe2\x80", "\xe2\x80\xa8", "\x7f", "}", ",", `\"`, "<", ">", "&"}

func randomText(rng *rand.Rand) string {
	s := ""
	for range rng.IntN(5) {
		s += pieces[rng.IntN(len(pieces))]
	}
	return s
}

// randomValue is a JSON value with whitespace of every kind between its
// tokens, or none.
func randomValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(7); {
	case n == 0 || depth > 3:
		return randomText(rng)
	case n == 1:
		return rng.Float64() * 1000
	case n == 2:
		return rng.IntN(2) == 0
	case n == 3:
		return nil
	case n == 4:
		l := make([]any, rng.IntN(4))
		for i := range l {
			l[i] = randomValue(rng, depth+1)
		}
		return l
	default:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[randomText(rng)] = randomValue(rng, depth+1)
		}
		return m
	}
}

func TestAppendString(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := randomText(rng)
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendString(nil, s)), "%q", s)
	}
}

func TestAppendRaw(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	spaces := []string{"", " ", "\t", "\n", "\r\n  "}
	fast := 0
	for range 20000 {
		v := randomValue(rng, 0)
		compact, err := json.Marshal(v)
		require.NoError(t, err)
		if rng.IntN(3) == 0 {
			// Written with HTML escaping off: <, >, & and U+2028, U+2029
			// as they are, for AppendRaw to escape.
			var sb strings.Builder
			enc := json.NewEncoder(&sb)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(v))
			compact = []byte(strings.TrimSuffix(sb.String(), "\n"))
		}
		var raw []byte
		if rng.IntN(2) == 0 {
			raw = compact // as tulip holds most: compact, maybe with escapes to undo
		} else {
			var indented []byte
			indented, err = json.MarshalIndent(json.RawMessage(compact), spaces[rng.IntN(len(spaces))], spaces[rng.IntN(len(spaces))])
			require.NoError(t, err)
			raw = indented
		}
		want, err := json.Marshal(json.RawMessage(raw))
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendRaw(nil, raw)), "%q", raw)
		if !rawNeedsWork(raw) {
			fast++
		}
	}
	require.Greater(t, fast, 1000, "the fast path is taken")
	for _, compact := range []string{`{"a":"hello world","b":[1,2.5,null]}`, `"a \" b"`, `["\\",{" ":" "}]`} {
		require.False(t, rawNeedsWork([]byte(compact)), "compact, nothing to escape: copied as it is: %s", compact)
	}
	require.Equal(t, "null", string(AppendRaw(nil, nil)))
	require.Equal(t, `x:{"a":1}`, string(AppendRaw([]byte("x:"), json.RawMessage(` { "a" : 1 } `))))
	require.Equal(t, `"\u003cb\u003e \u2028"`, string(AppendRaw(nil, json.RawMessage("\"<b> \u2028\""))))
}

// encodeNoHTML is what an encoding/json Encoder with HTML escaping off
// writes for v.
func encodeNoHTML(t *testing.T, v any) string {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return strings.TrimSuffix(sb.String(), "\n")
}

func TestAppendNoHTML(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	spaces := []string{"", " ", "\t", "\n", "\r\n  "}
	for range 20000 {
		s := randomText(rng)
		require.Equal(t, encodeNoHTML(t, s), string(AppendStringNoHTML(nil, s)), "%q", s)

		raw := []byte(encodeNoHTML(t, randomValue(rng, 0)))
		if rng.IntN(2) == 0 {
			indented, err := json.MarshalIndent(json.RawMessage(raw), spaces[rng.IntN(len(spaces))], spaces[rng.IntN(len(spaces))])
			require.NoError(t, err)
			raw = indented
		}
		require.Equal(t, encodeNoHTML(t, json.RawMessage(raw)), string(AppendRawNoHTML(nil, raw)), "%q", raw)
	}
	require.Equal(t, "null", string(AppendRawNoHTML(nil, nil)))
}
