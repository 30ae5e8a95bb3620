package dedup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestNearestMiss(t *testing.T) {
	type call struct {
		tool, args string
		response   int
	}
	refund := func(args string, resp int) call { return call{"issue_refund", args, resp} }
	cases := []struct {
		name       string
		log        []call
		call       call
		pre        string // the call's arguments before a hook rewrote them
		idempotent bool
		matching   bool
		want       *NearMiss
	}{
		{name: "no record of the tool", log: []call{{"page_oncall", `{"service":"db"}`, 1}},
			call: refund(`{"order_id":"A","amount":120.0}`, 2), idempotent: true, matching: true, want: nil},
		{name: "another amount", log: []call{refund(`{"order_id":"A","amount":120.0}`, 1)},
			call: refund(`{"order_id":"A","amount":120.5}`, 2), idempotent: true, matching: true,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonArguments, Distance: 1,
				Differences: []Difference{{Path: "/amount", Was: raw(`120.0`), Now: raw(`120.5`)}}}},
		{name: "a member added and one renamed", log: []call{refund(`{"order_id":"A","amount":5}`, 1)},
			call: refund(`{"order":"A","amount":5.0,"reason":"dup"}`, 2), idempotent: true, matching: true,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonArguments, Distance: 3,
				Differences: []Difference{{Path: "/order", Now: raw(`"A"`)}, {Path: "/order_id", Was: raw(`"A"`)}, {Path: "/reason", Now: raw(`"dup"`)}}}},
		{name: "the nearest of several", log: []call{
			refund(`{"order_id":"A","amount":1,"note":"x"}`, 1),
			refund(`{"order_id":"B","amount":7,"note":"y"}`, 1),
			refund(`{"order_id":"B","amount":9,"note":"z"}`, 1)},
			call: refund(`{"order_id":"B","amount":5,"note":"y"}`, 2), idempotent: true, matching: true,
			want: &NearMiss{Record: 1, CallID: "c1", Reason: ReasonArguments, Distance: 1,
				Differences: []Difference{{Path: "/amount", Was: raw(`7`), Now: raw(`5`)}}}},
		{name: "not idempotent", log: []call{{"page_oncall", `{"service":"db"}`, 1}},
			call: call{"page_oncall", `{"service": "db"}`, 2}, idempotent: false, matching: true,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonNotIdempotent}},
		{name: "after resume", log: []call{refund(`{"order_id":"A","amount":120}`, 1)},
			call: refund(`{"order_id":"A","amount":120.0}`, 2), idempotent: true, matching: false,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonAfterResume}},
		{name: "same response, 120 and 120.0", log: []call{refund(`{"order_id":"A","amount":120}`, 2)},
			call: refund(`{"order_id":"A","amount":120.0}`, 2), idempotent: true, matching: true,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonSameResponse}},
		{name: "a hook rewrote it", log: []call{refund(`{"order_id":"ord-1","amount":5}`, 1)},
			call: refund(`{"order_id":"ORD-1","amount":5}`, 2), pre: `{"order_id":"ord-1","amount":5}`, idempotent: true, matching: true,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonHook, Distance: 1,
				Differences: []Difference{{Path: "/order_id", Was: raw(`"ord-1"`), Now: raw(`"ORD-1"`)}}}},
		{name: "arrays and escaped names", log: []call{{"t", `{"a/b":[1,2],"c~":{"d":[true]}}`, 1}},
			call: call{"t", `{"a/b":[1,2,3],"c~":{"d":[1]}}`, 2}, idempotent: true, matching: true,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonArguments, Distance: 2,
				Differences: []Difference{{Path: "/a~1b/2", Now: raw(`3`)}, {Path: "/c~0/d/0", Was: raw(`true`), Now: raw(`1`)}}}},
		{name: "types kept apart, big integers exact", log: []call{{"t", `{"n":9007199254740993,"s":"1","z":null}`, 1}},
			call: call{"t", `{"n":9007199254740992,"s":1}`, 2}, idempotent: true, matching: true,
			want: &NearMiss{Record: 0, CallID: "c0", Reason: ReasonArguments, Distance: 3,
				Differences: []Difference{{Path: "/n", Was: raw(`9007199254740993`), Now: raw(`9007199254740992`)},
					{Path: "/s", Was: raw(`"1"`), Now: raw(`1`)}, {Path: "/z", Was: raw(`null`)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLog()
			for i, c := range tc.log {
				for l.Response() < c.response {
					l.BeginResponse()
				}
				l.Append(Record{Tool: c.tool, Response: c.response, CallID: fmt.Sprintf("c%d", i), Origin: Executed}, mustParse(t, c.args))
			}
			for l.Response() < tc.call.response {
				l.BeginResponse()
			}
			var pre *Args
			if tc.pre != "" {
				pre = mustParse(t, tc.pre)
			}
			got := l.NearestMiss(tc.call.tool, mustParse(t, tc.call.args), pre, tc.call.response, l.Len(), tc.idempotent, tc.matching)
			require.Equal(t, tc.want, got)
		})
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// A record at or after before (the call's own, still pending) is never its
// own near miss; thin records name their holder's record without values.
func TestNearestMissBounds(t *testing.T) {
	l := NewLog()
	l.BeginResponse()
	own := l.AppendPending(Record{Tool: "t", Response: 1, CallID: "c0", Origin: Executed}, mustParse(t, `{"a":1}`))
	require.Nil(t, l.NearestMiss("t", own.Args(), nil, 1, own.Seq, true, true))

	full := NewLog()
	full.BeginResponse()
	full.Append(Record{Tool: "t", Response: 1, Run: "r1", CallID: "c0", Origin: Executed}, mustParse(t, `{"a":1}`))
	snap, err := full.ThinSnapshot(1, "r1", 1<<20, func(*Record) (int, bool) { return 0, false })
	require.NoError(t, err)
	thin, err := Restore(snap)
	require.NoError(t, err)
	thin.BeginResponse()
	require.Equal(t, &NearMiss{Record: 0, CallID: "c0", Reason: ReasonArguments},
		thin.NearestMiss("t", mustParse(t, `{"a":2}`), nil, 2, 1, true, true))
	require.Equal(t, &NearMiss{Record: 0, CallID: "c0", Reason: ReasonNotIdempotent},
		thin.NearestMiss("t", mustParse(t, `{"a":1.0}`), nil, 2, 1, false, true), "a thin record matches by its hash")

	// A long value is cut and says its length; more differences than
	// MaxDifferences are counted, not listed.
	long := strings.Repeat("é", 400)
	d, n := Diff(mustParse(t, fmt.Sprintf(`{"a":%q,"b":1,"c":1,"d":1}`, long)), mustParse(t, `{"a":"x","b":2,"c":2,"d":2}`))
	require.Equal(t, 4, n)
	require.Len(t, d, MaxDifferences)
	var s string
	require.NoError(t, json.Unmarshal(d[0].Was, &s))
	require.Contains(t, s, "(802 bytes)")
	require.LessOrEqual(t, len(d[0].Was), maxDiffValue+64)
}

// The near miss is kept in a snapshot and restored.
func TestNearMissSnapshot(t *testing.T) {
	l := NewLog()
	l.BeginResponse()
	r := l.Append(Record{Tool: "t", Response: 1, CallID: "c0", Origin: Executed}, mustParse(t, `{"a":1}`))
	r.NearMiss = &NearMiss{Record: 3, CallID: "x", Reason: ReasonArguments, Distance: 1, Differences: []Difference{{Path: "/a", Was: raw(`2`), Now: raw(`1`)}}}
	snap, err := l.Snapshot()
	require.NoError(t, err)
	back, err := Restore(snap)
	require.NoError(t, err)
	require.Equal(t, r.NearMiss, back.At(0).NearMiss)
}

// BenchmarkNearestMiss measures explaining a miss in logs of up to 100,000
// records of one tool, against parsing the call and looking it up (the work
// every call does anyway), in the same run: the cost stays flat from 1,000
// to 100,000 records because at most NearMissCandidates records are
// compared.
func BenchmarkNearestMiss(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		l := NewLog()
		l.BeginResponse()
		for i := 0; i < n; i++ {
			l.Append(Record{Tool: "issue_refund", Response: 1, CallID: fmt.Sprint(i), Origin: Executed}, mustParse(b, argText(i, 100)))
		}
		l.BeginResponse()
		text := argText(n+1, 100)
		call := mustParse(b, text)
		b.Run(fmt.Sprintf("records=%d/parse+lookup", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if r, _ := l.FindMatchingExecution("issue_refund", mustParse(b, text), 2); r != nil {
					b.Fatal("matched")
				}
			}
		})
		b.Run(fmt.Sprintf("records=%d/nearest", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if nm := l.NearestMiss("issue_refund", call, nil, 2, l.Len(), true, true); nm == nil || nm.Reason != ReasonArguments {
					b.Fatal(nm)
				}
			}
		})
	}
}

func TestRank(t *testing.T) {
	l := NewLog()
	l.BeginResponse()
	for i, a := range []string{`{"id":"A","n":1}`, `{"id":"B","n":2}`, `{"id":"A","n":2}`, `{"id":"A","n":2.0}`} {
		l.Append(Record{Tool: "t", Response: 1, CallID: fmt.Sprint("c", i), Origin: Executed}, mustParse(t, a))
	}
	l.Append(Record{Tool: "u", Response: 1, CallID: "other", Origin: Executed}, mustParse(t, `{"id":"A","n":2}`))
	got := l.Rank("t", mustParse(t, `{"id":"A","n":2}`), 4)
	var order []int
	for _, c := range got {
		order = append(order, c.Record)
	}
	require.Equal(t, []int{3, 2, 1, 0}, order, "equal values first (latest first), then by distance")
	require.Equal(t, "same values", got[0].DifferencesText())
	require.Equal(t, "/id \"B\" → \"A\"", got[2].DifferencesText())
	require.Len(t, l.Rank("t", mustParse(t, `{}`), 2), 2, "only records before")
}

// A difference's value is the value's JSON (cut when long), whichever way
// cut writes it: strings with and without escapes, at the length where
// cutting starts, numbers as written, containers.
func TestCutIsTheValuesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	chars := []string{"a", "Z", " ", "\"", "\\", "\n", "\x01", "<", "é", "\u2028", "😀"}
	for i := range 5000 {
		var sb strings.Builder
		for range rng.IntN(300) {
			sb.WriteString(chars[rng.IntN(len(chars))])
		}
		v := StringValue(sb.String())
		if rng.IntN(4) == 0 { // plain ASCII, around the length where cutting starts
			v = StringValue(strings.Repeat("a", maxDiffValue-4+rng.IntN(8)))
		}
		if rng.IntN(4) == 0 {
			str, _ := json.Marshal(sb.String())
			num := fmt.Sprintf("%d.%d", rng.IntN(1000), rng.IntN(10))
			switch rng.IntN(3) {
			case 0:
				num = strconv.Itoa(rng.IntN(2000) - 1000)
			case 1:
				num = strings.Repeat("9", 250+rng.IntN(20)) // an integer past the cut
			}
			args, err := Parse(fmt.Sprintf(`{"n": %s, "s": %s}`, num, str), Limits{})
			require.NoError(t, err)
			v = *args.Value()
			if rng.IntN(2) == 0 {
				v = *v.Get("n")
			}
		}
		want := v.JSON()
		if len(want) > maxDiffValue {
			head := want[:maxDiffValue-64]
			for !utf8.ValidString(head) {
				head = head[:len(head)-1]
			}
			b, _ := json.Marshal(fmt.Sprintf("%s… (%d bytes)", head, len(want)))
			want = string(b)
		}
		require.Equal(t, want, string(cut(&v)), "value %d", i)
	}
}

// A thin record is matched by its arguments' hash, which thread states
// keep: the hash is SHA-256 of the value key, in hex, however the key was
// come by (written for the hash, or made before it).
func TestArgsHashIsTheValueKeys(t *testing.T) {
	for i, text := range []string{`{}`, `{"order_id": "ord-1", "amount": 120.0}`, `{"amount": 120, "order_id": "ord-1"}`,
		`{"a": [1, 2.5, {"b": null}], "é": "\u2028", "c": true}`, `{"big": 1e300, "neg": -0.0}`} {
		fresh, err := Parse(text, Limits{})
		require.NoError(t, err)
		keyed, err := Parse(text, Limits{})
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(keyed.ValueKey()))
		want := hex.EncodeToString(sum[:])
		require.Equal(t, want, fresh.ArgsHash(), "args %d, its key not made", i)
		require.Equal(t, want, keyed.ArgsHash(), "args %d, its key made", i)
	}
}
