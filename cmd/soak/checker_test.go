package soak

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tulip-temporal/tulip/internal/agentrun"
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
	noFull := func(Record) (*Record, error) { return nil, errors.New("no run holds it") }
	resolved := func(how string) func(*Record) {
		return func(r *Record) { r.Unknown = &dedup.Unknown{Cause: "heartbeat", Checks: 1, Resolution: how} }
	}
	thin := func(r *Record) { r.ArgsHash, r.Holder = strings.Repeat("a", 64), "run-1" }
	// The full record of a thin t2k0-a, as its holder's log gives it.
	fullAs := func(how string) func(Record) (*Record, error) {
		return func(r Record) (*Record, error) {
			if r.HeldBy() != "run-1" {
				return nil, fmt.Errorf("asked run %q", r.HeldBy())
			}
			f := rec("t2k0-a", dedup.Executed, -1)
			f.Key, f.Unknown = "k1", &dedup.Unknown{Cause: "heartbeat", Resolution: how}
			return &f, nil
		}
	}
	cases := []struct {
		name      string
		calls     map[string]int
		keys      map[string]int
		edit      func(*Record) // of t2k0-a, whose key is k1
		full      func(Record) (*Record, error)
		completed func(string) bool
		want      int
	}{
		{"reached", map[string]int{"t2k0-a": 1}, nil, nil, noFull, all, 0},
		{"never reached", nil, nil, nil, noFull, all, 1},
		{"never reached, its run did not complete", nil, nil, nil, noFull, func(string) bool { return false }, 0},
		{"its key reached, resolved by a check", nil, map[string]int{"k1": 1}, resolved(agentrun.ResolvedApplied), noFull, all, 0},
		{"its key reached, resolved by a person", nil, map[string]int{"k1": 1}, resolved(agentrun.ResolvedAnswered), noFull, all, 0},
		{"its key reached, its outcome known", nil, map[string]int{"k1": 1}, nil, noFull, all, 1},
		{"its key reached, run again", nil, map[string]int{"k1": 1}, resolved(agentrun.ResolvedRetried), noFull, all, 1},
		{"resolved by a person, no request carried its key", nil, map[string]int{"k2": 1}, resolved(agentrun.ResolvedAnswered), noFull, all, 1},
		{"thin, its key reached, its holder says answered", nil, map[string]int{"k1": 1}, thin, fullAs(agentrun.ResolvedAnswered), all, 0},
		{"thin, its key reached, its holder says run again", nil, map[string]int{"k1": 1}, thin, fullAs(agentrun.ResolvedRetried), all, 1},
		{"thin, its key reached, no holder answers", nil, map[string]int{"k1": 1}, thin, noFull, all, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs := slices.Clone(got)
			recs[0].Key = "k1"
			if c.edit != nil {
				c.edit(&recs[0])
			}
			fs, byKey := CheckMissing(recs, Reached{Calls: c.calls, Keys: c.keys}, serviced, c.completed, c.full)
			if len(fs) != c.want || (c.want > 0 && (fs[0].Kind != FindMissingEffect || fs[0].Call != "t2k0-a" || fs[0].Duplicate)) {
				t.Fatalf("findings %v, want %d missing effect of t2k0-a", fs, c.want)
			}
			if wantByKey := c.keys["k1"] > 0 && c.want == 0 && c.calls["t2k0-a"] == 0; (byKey == 1) != wantByKey {
				t.Fatalf("%d witnessed by key, want %v", byKey, wantByKey)
			}
		})
	}
}
