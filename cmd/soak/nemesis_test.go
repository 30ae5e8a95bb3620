package soak

import (
	"context"
	"io"
	"testing"
	"time"
)

// slowServer takes each fault: it comes back after slow.
type slowServer struct{ slow time.Duration }

func (s slowServer) Address() string { return "" }
func (s slowServer) Kinds() []string { return []string{ServerRestart, ServerPause} }
func (s slowServer) Stop()           {}
func (s slowServer) Inject(ctx context.Context, _ string) error {
	sleep(ctx, s.slow)
	return nil
}

// TestNemesisInjectsEveryScheduledFault: a server slower to come back than
// the whole fault phase still takes every fault the schedule asks for,
// each after the one before.
func TestNemesisInjectsEveryScheduledFault(t *testing.T) {
	n := newNemesis(slowServer{slow: 20 * time.Millisecond}, nil, nil, Options{KillEvery: -1, Progress: io.Discard})
	d := 10 * time.Millisecond
	n.run(context.Background(), d, Schedule(d, []Count{{ServerRestart, 3}, {ServerPause, 2}}))
	faults, kills := n.counts()
	if faults[ServerRestart] != 3 || faults[ServerPause] != 2 || len(kills) != 0 {
		t.Fatalf("faults %v, kills %d: want 3 restarts, 2 pauses, no kill", faults, len(kills))
	}
}

// TestNemesisStopsWithItsContext: once the phase's runs are done (--runs
// reached before --duration) the soak cancels the nemesis, which injects
// none of the faults scheduled later and returns.
func TestNemesisStopsWithItsContext(t *testing.T) {
	n := newNemesis(slowServer{}, nil, nil, Options{KillEvery: -1, Progress: io.Discard})
	d := time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	n.run(ctx, d, []Fault{{At: 0, Kind: ServerRestart}, {At: d / 2, Kind: ServerPause}})
	faults, _ := n.counts()
	if faults[ServerRestart] != 1 || faults[ServerPause] != 0 {
		t.Fatalf("faults %v: want the restart at 0 and not the pause at %s", faults, d/2)
	}
	if time.Since(start) > time.Minute {
		t.Fatalf("run returned after %s, not when its context ended", time.Since(start))
	}
}

func TestSchedule(t *testing.T) {
	cases := []struct {
		name   string
		d      time.Duration
		counts []Count
		want   map[string]int
	}{
		{"none", time.Minute, nil, map[string]int{}},
		{"one kind", time.Minute, []Count{{ServerRestart, 3}}, map[string]int{ServerRestart: 3}},
		{"several", 10 * time.Minute, []Count{{HistoryKill, 5}, {DBRestart, 2}, {ProxyDrop, 0}}, map[string]int{HistoryKill: 5, DBRestart: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Schedule(c.d, c.counts)
			got := map[string]int{}
			for k, f := range s {
				got[f.Kind]++
				if f.At <= 0 || f.At >= c.d {
					t.Fatalf("fault %v outside (0, %s)", f, c.d)
				}
				if k > 0 && s[k-1].At > f.At {
					t.Fatalf("not in time order: %v", s)
				}
				if k > 0 && s[k-1].At == f.At {
					t.Fatalf("two faults at once: %v", s)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("kinds %v, want %v", got, c.want)
			}
			for k, n := range c.want {
				if got[k] != n {
					t.Fatalf("%s: %d, want %d", k, got[k], n)
				}
			}
		})
	}
}

func TestSpread(t *testing.T) {
	cases := []struct {
		n    int
		want []int
	}{{0, []int{0, 0, 0, 0}}, {4, []int{1, 1, 1, 1}}, {6, []int{2, 2, 1, 1}}, {50, []int{13, 13, 12, 12}}}
	for _, c := range cases {
		got := Spread(c.n, ServiceKinds)
		for k, cnt := range got {
			if cnt.Kind != ServiceKinds[k] || cnt.N != c.want[k] {
				t.Fatalf("Spread(%d) = %v, want %v", c.n, got, c.want)
			}
		}
	}
}

func TestFaultCounts(t *testing.T) {
	o := Options{ServerRestarts: 2, Pauses: 1, ProxyDrops: 3, ProxyDelays: 1, ServiceKills: 5}
	cases := []struct {
		name  string
		kinds []string
		want  map[string]int
	}{
		{"embedded", (&embedded{}).Kinds(), map[string]int{ServerRestart: 2, ServerPause: 1, ProxyDrop: 3, ProxyDelay: 1}},
		{"cluster", (&onCluster{}).Kinds(), map[string]int{HistoryKill: 2, MatchingKill: 1, FrontendKill: 1, DBRestart: 1, ServerPause: 1, ProxyDrop: 3, ProxyDelay: 1}},
		{"address", external{}.Kinds(), map[string]int{ProxyDrop: 3, ProxyDelay: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]int{}
			for _, cnt := range faultCounts(o, c.kinds) {
				got[cnt.Kind] = cnt.N
			}
			if len(got) != len(c.want) {
				t.Fatalf("counts %v, want %v", got, c.want)
			}
			for k, n := range c.want {
				if got[k] != n {
					t.Fatalf("%s: %d, want %d (%v)", k, got[k], n, got)
				}
			}
		})
	}
}
