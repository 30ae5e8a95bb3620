package soak

import (
	"testing"
	"time"

	"github.com/tulip-temporal/tulip/dedup"
	"github.com/tulip-temporal/tulip/demo/witness"
)

func rec(call string, origin dedup.Origin, from int) Record {
	r := Record{CallID: call, Origin: origin, Tool: "issue_refund"}
	if from >= 0 {
		r.ServedFrom = &from
	}
	return r
}

func TestCheckThread(t *testing.T) {
	want := []Record{rec("r0-a", dedup.Executed, -1), rec("r0-b", dedup.Served, 0), rec("r1-a", dedup.Served, 0)}
	cases := []struct {
		name      string
		got       []Record
		findings  int
		duplicate bool
		call      string
	}{
		{"same", want, 0, false, ""},
		{"executed where served", []Record{want[0], rec("r0-b", dedup.Executed, -1), want[2]}, 1, true, "r0-b"},
		{"served from another record", []Record{want[0], want[1], rec("r1-a", dedup.Served, 1)}, 1, false, "r1-a"},
		{"a record missing", want[:2], 1, false, "r1-a"},
		{"a record more", append(append([]Record(nil), want...), rec("r2-a", dedup.Executed, -1)), 1, false, "r2-a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckThread(c.got, want)
			if len(fs) != c.findings {
				t.Fatalf("findings %v, want %d", fs, c.findings)
			}
			if c.findings > 0 && (fs[0].Duplicate != c.duplicate || fs[0].Call != c.call || fs[0].Run != callRun(c.call)) {
				t.Fatalf("finding %+v, want call %s duplicate %v", fs[0], c.call, c.duplicate)
			}
		})
	}
}

func TestCheckWitnesses(t *testing.T) {
	ref := NewEffects(map[int][]Record{0: {rec("r0-a", dedup.Executed, -1), rec("r0-b", dedup.Served, 0), rec("r1-a", dedup.Served, 0)}})
	at := time.Unix(1000, 0)
	req := func(call, key string, attempt, sec int) witness.Request {
		return witness.Request{Service: "billing", Tool: "issue_refund", Call: call, Key: key, Run: "run-x", Attempt: attempt, At: at.Add(time.Duration(sec) * time.Second)}
	}
	serviced := map[string]bool{"issue_refund": true}
	all := func(int) bool { return true }
	cases := []struct {
		name    string
		reqs    []witness.Request
		kinds   []string
		dups    int
		retried int
	}{
		{"one effect", []witness.Request{req("r0-a", "k", 1, 0)}, nil, 0, 0},
		{"a crash-window retry", []witness.Request{req("r0-a", "k", 1, 0), req("r0-a", "k", 2, 6)}, nil, 0, 1},
		{"twice on one attempt", []witness.Request{req("r0-a", "k", 1, 0), req("r0-a", "k", 1, 1)}, []string{FindSecondEffect}, 1, 0},
		{"again with another key", []witness.Request{req("r0-a", "k", 1, 0), req("r0-a", "k2", 2, 1)}, []string{FindSecondEffect}, 1, 0},
		{"a served call reached billing", []witness.Request{req("r0-a", "k", 1, 0), req("r0-b", "k", 1, 1)}, []string{FindServedReached}, 1, 0},
		{"no call named", []witness.Request{req("r0-a", "k", 1, 0), req("", "k", 1, 1)}, []string{FindUnknownCall}, 1, 0},
		{"an executed call never arrived", nil, []string{FindMissingEffect}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, retried := CheckWitnesses(c.reqs, ref, serviced, all)
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
	// A run that did not complete may miss its effect: no finding.
	if fs, _ := CheckWitnesses(nil, ref, serviced, func(int) bool { return false }); len(fs) != 0 {
		t.Fatalf("findings for a run that did not complete: %v", fs)
	}
}
