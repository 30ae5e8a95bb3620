package dedup

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// diffReference is Diff as it was first written (a map of member names, a
// path built for every member): TestDiffAsBefore holds Diff to it.
func diffReference(a, b *Value, path string, out *[]Difference) int {
	add := func(d Difference) int {
		if len(*out) < MaxDifferences {
			*out = append(*out, d)
		}
		return 1
	}
	switch {
	case a.kind == Object && b.kind == Object:
		n := 0
		keys := map[string]bool{}
		var order []string
		for _, v := range []*Value{a, b} {
			for i := range v.obj {
				if k := v.obj[i].Key; !keys[k] {
					keys[k] = true
					order = append(order, k)
				}
			}
		}
		sortStrings(order)
		for _, k := range order {
			p := path + "/" + pointerToken(k)
			av, bv := a.Get(k), b.Get(k)
			switch {
			case av == nil:
				n += add(Difference{Path: p, Now: cut(bv)})
			case bv == nil:
				n += add(Difference{Path: p, Was: cut(av)})
			default:
				n += diffReference(av, bv, p, out)
			}
		}
		return n
	case a.kind == Array && b.kind == Array:
		n := 0
		for i := 0; i < len(a.arr) || i < len(b.arr); i++ {
			p := path + "/" + strconv.Itoa(i)
			switch {
			case i >= len(a.arr):
				n += add(Difference{Path: p, Now: cut(&b.arr[i])})
			case i >= len(b.arr):
				n += add(Difference{Path: p, Was: cut(&a.arr[i])})
			default:
				n += diffReference(&a.arr[i], &b.arr[i], p, out)
			}
		}
		return n
	case Equal(a, b):
		return 0
	}
	return add(Difference{Path: path, Was: cut(a), Now: cut(b)})
}

// randomJSON is a random argument value: members from a few names (one
// with ~ and /), numbers equal in value but not in text, long strings.
func randomJSON(rng *rand.Rand, depth int) any {
	k := rng.IntN(9)
	if depth > 2 && k >= 6 {
		k = rng.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return json.Number([]string{"120", "120.0", "1e2", "100", "-0", "0"}[rng.IntN(6)])
	case 3:
		return []string{"", "a", "b", "ord-1", "<&>"}[rng.IntN(5)]
	case 4:
		return strings.Repeat("x", 200+rng.IntN(200))
	case 5:
		return rng.IntN(3)
	case 6, 7:
		m := map[string]any{}
		for range rng.IntN(5) {
			m[[]string{"a", "b", "c", "a/~b", "order_id", "amount"}[rng.IntN(6)]] = randomJSON(rng, depth+1)
		}
		return m
	}
	arr := make([]any, rng.IntN(4))
	for i := range arr {
		arr[i] = randomJSON(rng, depth+1)
	}
	return arr
}

func TestDiffAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	parse := func(v any) *Args {
		b, err := json.Marshal(map[string]any{"v": v, "w": randomJSON(rng, 1)})
		require.NoError(t, err)
		a, err := Parse(string(b), Limits{})
		require.NoError(t, err)
		return a
	}
	for i := range 20000 {
		a := parse(randomJSON(rng, 0))
		b := a
		if rng.IntN(4) > 0 {
			b = parse(randomJSON(rng, 0))
		}
		var want []Difference
		wantN := diffReference(&a.val, &b.val, "", &want)
		got, gotN := Diff(a, b)
		require.Equal(t, wantN, gotN, "pair %d: %s / %s", i, a.Text(), b.Text())
		require.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "pair %d: %s / %s", i, a.Text(), b.Text())
	}
}

// An argument object's hash is the same whether its value key was
// written already (and is hashed as text) or not (and is hashed as it is
// written): a call and a record meet in the log either way.
func TestValueHashEitherWay(t *testing.T) {
	texts := []string{`{"order_id": "ord-1", "amount": 120.0}`, `{"amount": 120, "order_id": "ord-1"}`, `{}`, `{"a": [1, {"b": null}], "c": "é\u2028"}`, `{"x": 1e3, "y": true}`}
	hs := newHasher()
	for _, text := range texts {
		cold, err := Parse(text, Limits{})
		require.NoError(t, err)
		warm, err := Parse(text, Limits{})
		require.NoError(t, err)
		_ = warm.ValueKey()
		require.Equal(t, cold.valueHashFor(hs, "t"), warm.valueHashFor(hs, "t"), text)
	}
}
