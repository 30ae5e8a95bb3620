package soak

import (
	"testing"
	"time"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo/witness"
)

func rec(call string, origin dedup.Origin, from int) Record {
	r := Record{CallID: call, Origin: origin, Tool: "issue_refund"}
	if from >= 0 {
		r.ServedFrom = &from
	}
	return r
}

func TestParseCall(t *testing.T) {
	cases := []struct {
		id, run, same string
		ok            bool
	}{
		{"t3k15-a", "t3k15", "k15-a", true},
		{"t0k0-h", "t0k0", "k0-h", true},
		{"r3-a", "?", "r3-a", false},
		{"t3k15", "?", "t3k15", false},
		{"", "?", "", false},
		{"t3k15x-a", "?", "t3k15x-a", false},
	}
	for _, c := range cases {
		_, _, _, ok := parseCall(c.id)
		if ok != c.ok || runOf(c.id) != c.run || sameCall(c.id) != c.same {
			t.Errorf("%q: ok %v run %q same %q, want %v %q %q", c.id, ok, runOf(c.id), sameCall(c.id), c.ok, c.run, c.same)
		}
	}
}

func TestCheckThread(t *testing.T) {
	// The reference thread is thread 9; the thread checked is thread 2.
	ref := []Record{rec("t9k0-a", dedup.Executed, -1), rec("t9k0-b", dedup.Cached, 0), rec("t9k1-a", dedup.Cached, 0), rec("t9k2-a", dedup.Cached, 0)}
	want := Prefix(ref, 2)
	if len(want) != 3 {
		t.Fatalf("Prefix(ref, 2) = %d records, want 3", len(want))
	}
	same := []Record{rec("t2k0-a", dedup.Executed, -1), rec("t2k0-b", dedup.Cached, 0), rec("t2k1-a", dedup.Cached, 0)}
	cases := []struct {
		name      string
		got       []Record
		findings  int
		duplicate bool
		call      string
	}{
		{"same", same, 0, false, ""},
		{"executed where served", []Record{same[0], rec("t2k0-b", dedup.Executed, -1), same[2]}, 1, true, "t2k0-b"},
		{"served from another record", []Record{same[0], same[1], rec("t2k1-a", dedup.Cached, 1)}, 1, false, "t2k1-a"},
		{"another call", []Record{same[0], rec("t2k0-c", dedup.Cached, 0), same[2]}, 2, false, "t2k0-c"},
		{"a record missing", same[:2], 1, false, "t2k1-a"},
		{"a record missing, the rest in place", []Record{same[0], same[2]}, 1, false, "t2k0-b"},
		{"a record more", append(append([]Record(nil), same...), rec("t2k2-a", dedup.Executed, -1)), 1, true, "t2k2-a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckThread(2, c.got, want)
			if len(fs) != c.findings {
				t.Fatalf("findings %v, want %d", fs, c.findings)
			}
			if c.findings > 0 && (fs[0].Duplicate != c.duplicate || fs[0].Call != c.call || fs[0].Run != runOf(c.call)) {
				t.Fatalf("finding %+v, want call %s duplicate %v", fs[0], c.call, c.duplicate)
			}
		})
	}
}

func TestCheckWitnesses(t *testing.T) {
	// Thread 9 is the reference of the threads that are not plain; thread 4
	// of the plain ones, where k0-b executes.
	ref := NewEffects(map[bool][]Record{
		false: {rec("t9k0-a", dedup.Executed, -1), rec("t9k0-b", dedup.Cached, 0), rec("t9k1-a", dedup.Cached, 0)},
		true:  {rec("t4k0-a", dedup.Executed, -1), rec("t4k0-b", dedup.Executed, -1)},
	})
	plain := func(t int) bool { return t%2 == 1 }
	at := time.Unix(1000, 0)
	req := func(call, key string, attempt, sec int) witness.Request {
		return witness.Request{Service: "billing", Tool: "issue_refund", Call: call, Key: key, Run: "run-x", Attempt: attempt, At: at.Add(time.Duration(sec) * time.Second)}
	}
	cases := []struct {
		name    string
		reqs    []witness.Request
		kinds   []string
		dups    int
		retried int
	}{
		{"one effect", []witness.Request{req("t2k0-a", "k", 1, 0)}, nil, 0, 0},
		{"a crash-window retry", []witness.Request{req("t2k0-a", "k", 1, 0), req("t2k0-a", "k", 2, 6)}, nil, 0, 1},
		{"twice on one attempt", []witness.Request{req("t2k0-a", "k", 1, 0), req("t2k0-a", "k", 1, 1)}, []string{FindSecondEffect}, 1, 0},
		{"again with another key", []witness.Request{req("t2k0-a", "k", 1, 0), req("t2k0-a", "k2", 2, 1)}, []string{FindSecondEffect}, 1, 0},
		{"a served call reached billing", []witness.Request{req("t2k0-a", "k", 1, 0), req("t2k0-b", "k", 1, 1)}, []string{FindServedReached}, 1, 0},
		{"the same call on a plain thread executes", []witness.Request{req("t3k0-b", "k", 1, 1)}, nil, 0, 0},
		{"no call named", []witness.Request{req("", "k", 1, 1)}, []string{FindUnknownCall}, 1, 0},
		{"a call the scripts do not make", []witness.Request{req("t2k7-z", "k", 1, 1)}, []string{FindUnknownCall}, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, retried := CheckWitnesses(c.reqs, ref, plain)
			if len(fs) != len(c.kinds) || retried != c.retried {
				t.Fatalf("findings %v retried %d, want %v and %d", fs, retried, c.kinds, c.retried)
			}
			dups := 0
			for k, f := range fs {
				if f.Kind != c.kinds[k] {
					t.Fatalf("finding %v, want kind %s", f, c.kinds[k])
				}
				if f.Duplicate {
					dups++
				}
			}
			if dups != c.dups {
				t.Fatalf("%d duplicates, want %d", dups, c.dups)
			}
		})
	}
}

func TestCheckMissing(t *testing.T) {
	got := []Record{rec("t2k0-a", dedup.Executed, -1), rec("t2k0-b", dedup.Cached, 0), rec("t2k1-a", dedup.Executed, -1)}
	got[2].Tool = "mint_case_id"
	serviced := map[string]bool{"issue_refund": true}
	all := func(string) bool { return true }
	cases := []struct {
		name      string
		reached   map[string]int
		completed func(string) bool
		want      int
	}{
		{"reached", map[string]int{"t2k0-a": 1}, all, 0},
		{"never reached", map[string]int{}, all, 1},
		{"never reached, its run did not complete", map[string]int{}, func(string) bool { return false }, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckMissing(got, c.reached, serviced, c.completed)
			if len(fs) != c.want || (c.want > 0 && (fs[0].Kind != FindMissingEffect || fs[0].Call != "t2k0-a" || fs[0].Duplicate)) {
				t.Fatalf("findings %v, want %d missing effect of t2k0-a", fs, c.want)
			}
		})
	}
}
