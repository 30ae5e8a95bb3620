package dedup

import (
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	`{"order_id": "ord-4821", "amount": 120.0}`,
	`{"amount": 120, "order_id": "ord-4821"}`,
	`{"x": 9007199254740993}`, `{"x": 9007199254740992.0}`, `{"x": 1e400}`, `{"x": -0.0}`,
	`{"x": "\ud800"}`, `{"x": "\ud83d\ude00"}`, `{"a": [1, {"b": null}], "c": true}`,
	`{"x": 1, "x": 2}`, `[1]`, `{"a": }`, `{"a": 1} x`, strings.Repeat("[", 100),
}

// FuzzParse: parsing never panics; an accepted text re-encodes to Args that
// are equal under both relations; value equality is reflexive.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s, Limits{})
		if err != nil {
			return
		}
		if !a.ValueEqual(a) {
			t.Fatalf("value equality is not reflexive for %q", s)
		}
		b, err := Parse(a.Value().JSON(), Limits{MaxDepth: maxDepthCap, MaxBytes: 1 << 30})
		if err != nil {
			t.Fatalf("compact encoding %q does not parse: %v", a.Value().JSON(), err)
		}
		if a.SortedKeyJSON() != b.SortedKeyJSON() || a.ValueKey() != b.ValueKey() || !a.ValueEqual(b) {
			t.Fatalf("compact re-encoding changed %q", s)
		}
	})
}

// FuzzRelations: Equal is symmetric and agrees with the value key (and so
// with its hash); sorted-key JSON equality implies value equality.
func FuzzRelations(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+1)%len(fuzzSeeds)])
	}
	f.Add(`{"x": 120}`, `{"x": 120.0}`)
	f.Add(`{"x": 1e2}`, `{"x": 100.0}`)
	f.Add(`{"x": 1E2}`, `{"x": 100}`)
	f.Fuzz(func(t *testing.T, s1, s2 string) {
		a, err1 := Parse(s1, Limits{})
		b, err2 := Parse(s2, Limits{})
		if err1 != nil || err2 != nil {
			return
		}
		eq := a.ValueEqual(b)
		if eq != b.ValueEqual(a) {
			t.Fatalf("Equal not symmetric: %q %q", s1, s2)
		}
		if eq != (a.ValueKey() == b.ValueKey()) {
			t.Fatalf("Equal=%v disagrees with the value key: %q %q", eq, s1, s2)
		}
		if eq && a.valueHashFor(newHasher(), "t") != b.valueHashFor(newHasher(), "t") {
			t.Fatalf("equal values hash differently: %q %q", s1, s2)
		}
		// The log's single hash index relies on this implication.
		if a.SortedKeyEqual(b) && !eq {
			t.Fatalf("sorted-key JSON equal but not value-equal: %q %q", s1, s2)
		}
	})
}

// FuzzSnapshot: a log of fuzzed records round-trips byte for byte.
func FuzzSnapshot(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "issue_refund", `{"ok":true}`)
	}
	f.Fuzz(func(t *testing.T, args, tool, result string) {
		a, err := Parse(args, Limits{})
		if err != nil {
			return
		}
		l := NewLog()
		r := Record{Tool: tool, Response: l.BeginResponse(), Origin: Executed, Error: &ToolError{Type: "x", Message: result}}
		l.Append(r, a)
		snap, err := l.Snapshot()
		if err != nil {
			return // tool or message not valid UTF-8: cannot be encoded
		}
		back, err := Restore(snap)
		if err != nil {
			t.Fatalf("restore: %v\n%s", err, snap)
		}
		snap2, _ := back.Snapshot()
		if string(snap) != string(snap2) {
			t.Fatalf("round trip changed the snapshot:\n%s\n%s", snap, snap2)
		}
	})
}
