package soak

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRecoveries(t *testing.T) {
	kill := time.Unix(100, 0)
	at := func(sec float64) int64 { return kill.Add(time.Duration(sec * float64(time.Second))).UnixNano() }
	lines := []Attempt{
		// In flight on killed 7, retried on 8 after 6 s.
		{Phase: PhaseStart, Type: "tulip.Model", Workflow: "w", Run: "r", Activity: "5", Attempt: 1, At: at(-1), Pid: 7},
		// Ended on 7 before the kill: not in flight.
		{Phase: PhaseStart, Type: "tulip.tool.page_oncall", Workflow: "w", Run: "r", Activity: "3", Attempt: 1, At: at(-3), Pid: 7},
		{Phase: PhaseEnd, Type: "tulip.tool.page_oncall", Workflow: "w", Run: "r", Activity: "3", Attempt: 1, At: at(-2), Pid: 7},
		// Not a call: not counted.
		{Phase: PhaseStart, Type: "tulip.LoadThread", Workflow: "w", Run: "r", Activity: "1", Attempt: 1, At: at(-1), Pid: 7},
		// In flight on 7, never retried.
		{Phase: PhaseStart, Type: "tulip.tool.issue_refund", Workflow: "w2", Run: "r2", Activity: "9", Attempt: 2, At: at(-0.5), Pid: 7},
		// In flight on a live worker.
		{Phase: PhaseStart, Type: "tulip.Model", Workflow: "w3", Run: "r3", Activity: "5", Attempt: 1, At: at(-1), Pid: 8},
		{Phase: PhaseStart, Type: "tulip.Model", Workflow: "w", Run: "r", Activity: "5", Attempt: 3, At: at(9), Pid: 8},
		{Phase: PhaseStart, Type: "tulip.Model", Workflow: "w", Run: "r", Activity: "5", Attempt: 2, At: at(6), Pid: 8},
		// In flight on 7, a tool that checks: its check after the kill
		// (2 s) recovers it; a check of another tool does not.
		{Phase: PhaseStart, Type: "tulip.tool.charge", Workflow: "w4", Run: "r4", Activity: "7", Attempt: 1, At: at(-0.5), Pid: 7},
		{Phase: PhaseStart, Type: "tulip.check.other", Workflow: "w4", Run: "r4", Activity: "8", Attempt: 1, At: at(1), Pid: 8},
		{Phase: PhaseStart, Type: "tulip.check.charge", Workflow: "w4", Run: "r4", Activity: "9", Attempt: 1, At: at(2), Pid: 8},
		// A worker that killed itself after an effect.
		{Phase: PhaseEffectKill, Type: "tulip.tool.charge", Workflow: "w5", Run: "r5", Activity: "7", Attempt: 1, At: at(3), Pid: 9},
	}
	var sb strings.Builder
	for _, a := range lines {
		b, _ := json.Marshal(a)
		sb.Write(append(b, '\n'))
	}
	sb.WriteString(`{"p":"start","type":"tulip.Mo`) // torn by a kill
	open := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(sb.String())), nil }
	rec, err := Recoveries(open, []Kill{{Pid: 7, At: kill}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Samples) != 2 || rec.Samples[0] != 2*time.Second || rec.Samples[1] != 6*time.Second {
		t.Fatalf("samples %v, want [2s 6s]", rec.Samples)
	}
	if rec.EffectKills != 1 {
		t.Fatalf("effect kills %d, want 1", rec.EffectKills)
	}
	if len(rec.Unrecovered) != 1 || rec.Unrecovered[0] != "w2/r2/9" {
		t.Fatalf("unrecovered %v", rec.Unrecovered)
	}
}

func TestPercentile(t *testing.T) {
	var r Recovery
	if r.Percentile(0.99) != 0 {
		t.Fatal("no samples: 0")
	}
	for k := 1; k <= 100; k++ {
		r.Samples = append(r.Samples, time.Duration(k)*time.Second)
	}
	cases := []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Second}, {0.99, 99 * time.Second}, {1, 100 * time.Second}, {0.001, time.Second}}
	for _, c := range cases {
		if got := r.Percentile(c.q); got != c.want {
			t.Fatalf("p%v = %s, want %s", c.q, got, c.want)
		}
	}
}
