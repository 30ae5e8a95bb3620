package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tulip-temporal/tulip/internal/demo/billing"
)

// report is what a load test found. The first block are the verdicts
// (OK when all are 0); the rest describe the run.
type report struct {
	OK              bool `json:"ok"`
	LostMessages    int  `json:"lost_messages"`
	WrongAnswers    int  `json:"wrong_answers"`
	RepeatedEffects int  `json:"repeated_effects"` // refunds billing made beyond one per order
	// MissingRefunds are answered refund turns billing has no such
	// refund for (each is a wrong answer too).
	MissingRefunds int `json:"missing_refunds"`

	Conversations int     `json:"conversations"`
	DurationS     float64 `json:"duration_s"` // the load's, until the last turn ended
	Workers       int     `json:"workers"`
	BreakDedup    bool    `json:"break_dedup,omitempty"`
	UpstreamMS    float64 `json:"upstream_delay_ms"`
	ThinkMS       float64 `json:"think_ms"`

	TurnsSent      int     `json:"turns_sent"`
	TurnsAnswered  int     `json:"turns_answered"`
	LateAnswers    int     `json:"late_answers"` // answered after -turn-timeout
	TurnsPerSecond float64 `json:"turns_per_second"`
	ThreadsMade    int64   `json:"threads_made"`
	// OpenThreadsPeak: threads open at once (a conversation has one).
	OpenThreadsPeak int   `json:"open_threads_peak"`
	ModelCalls      int64 `json:"model_calls"`

	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	LatencyMaxMS float64 `json:"latency_max_ms"`
	// Added latency: a turn's latency less its model calls' time at the
	// upstream (the model server's, from request to last byte).
	AddedP50MS    float64 `json:"added_p50_ms"`
	AddedP99MS    float64 `json:"added_p99_ms"`
	UpstreamP50MS float64 `json:"upstream_per_turn_p50_ms"`

	RefundRequests int `json:"refund_requests"` // at billing's witness: each a run of the refund's body
	RefundsMade    int `json:"refunds_made"`
	// BodyReruns: refund requests that repeated a key (a body run again
	// after a worker died: billing made no new refund).
	BodyReruns int `json:"body_reruns"`

	WorkerKills     int     `json:"worker_kills"`
	ServeRestarts   int     `json:"serve_restarts"`
	RestartDowntime float64 `json:"restart_out_of_rotation_ms"`
	ShutdownCuts    int64   `json:"streams_cut_by_shutdown"`
	BrokenStreams   int64   `json:"streams_broken"`
	Resumes         int     `json:"stream_resumes"`
	ResentKeyed     int64   `json:"resent_keyed"`
	ResentRefused   int64   `json:"resent_refused"`
	ResentNotSent   int64   `json:"resent_not_sent"`
	ProxyFailovers  int64   `json:"proxy_failovers"`
	ProxyAmbiguous  int64   `json:"proxy_ambiguous"`
	ProxyNotSent    int64   `json:"proxy_not_sent"`
	// The machine's CPU from the load's start to the end (the settling
	// included): busy, and used by this test's processes (the Temporal
	// server, serve, workers, model, billing, clients). Their difference
	// is what else ran meanwhile.
	MachineBusyPct float64 `json:"machine_busy_pct"`
	OwnCPUPct      float64 `json:"own_cpu_pct"`

	ServeRSSBaselineMB float64   `json:"serve_rss_baseline_mb"` // both instances, before the load
	ServeRSSPeakMB     float64   `json:"serve_rss_peak_mb"`     // both instances, the highest sum
	ServeRSSPeakEachMB []float64 `json:"serve_rss_peak_each_mb"`
	ServeRSSEndEachMB  []float64 `json:"serve_rss_end_each_mb"`
	// MemPerOpenThreadKB: (peak − baseline) / open threads.
	MemPerOpenThreadKB float64 `json:"mem_per_open_thread_kb"`

	LostSamples  []string `json:"lost_samples,omitempty"`
	WrongSamples []string `json:"wrong_samples,omitempty"`
	Logs         string   `json:"logs,omitempty"`
}

// report checks the turns against billing and the model's times.
func (l *load) report(bill *billing.Server, model *upstream, elapsed time.Duration) *report {
	r := &report{Conversations: l.cfg.conversations, DurationS: elapsed.Seconds(), Workers: l.cfg.workers, BreakDedup: l.cfg.breakDedup,
		UpstreamMS: ms(l.cfg.upstreamDelay), ThinkMS: ms(l.cfg.think), OpenThreadsPeak: l.cfg.conversations,
		ThreadsMade: l.stats.threads.Load(), ModelCalls: model.calls.Load(),
		ShutdownCuts: l.stats.shutdownCuts.Load(), BrokenStreams: l.stats.brokenStreams.Load(),
		ResentKeyed: l.stats.resendKeyed.Load(), ResentRefused: l.stats.resendRefused.Load(), ResentNotSent: l.stats.resendNotSent.Load()}
	made := map[string][]string{} // order → receipts
	for _, rc := range bill.Refunds() {
		made[rc.OrderID] = append(made[rc.OrderID], rc.RefundID)
		r.RefundsMade++
	}
	for _, rs := range made {
		r.RepeatedEffects += len(rs) - 1
	}
	keys := map[string]bool{}
	for _, w := range bill.Witnesses() {
		if w.Tool == "issue_refund" {
			r.RefundRequests++
			if keys[w.Key] {
				r.BodyReruns++
			}
			keys[w.Key] = true
		}
	}
	var lat, added, up []time.Duration
	l.mu.Lock()
	turns := l.turns
	l.mu.Unlock()
	for _, t := range turns {
		r.TurnsSent++
		r.Resumes += t.Resumes
		if t.Lost != "" {
			r.LostMessages++
			if len(r.LostSamples) < 10 {
				r.LostSamples = append(r.LostSamples, fmt.Sprintf("turn %s (%s, sent %d×): %s", t.Tag, t.Kind, t.Sends, t.Lost))
			}
			continue
		}
		r.TurnsAnswered++
		if t.Late {
			r.LateAnswers++
		}
		if t.Kind == "refund" && t.Wrong == "" && !slices.Contains(made[t.Order], t.Receipt) {
			r.MissingRefunds++
			t.Wrong = fmt.Sprintf("billing made no refund %s for %s (it made %v)", t.Receipt, t.Order, made[t.Order])
		}
		if t.Wrong != "" {
			r.WrongAnswers++
			if len(r.WrongSamples) < 10 {
				r.WrongSamples = append(r.WrongSamples, fmt.Sprintf("turn %s (%s): %s", t.Tag, t.Kind, t.Wrong))
			}
		}
		u := model.turn(t.Tag).took
		lat = append(lat, t.Latency)
		up = append(up, u)
		added = append(added, t.Latency-u)
	}
	r.TurnsPerSecond = float64(r.TurnsAnswered) / elapsed.Seconds()
	r.LatencyP50MS, r.LatencyP99MS, r.LatencyMaxMS = ms(pct(lat, 50)), ms(pct(lat, 99)), ms(pct(lat, 100))
	r.AddedP50MS, r.AddedP99MS = ms(pct(added, 50)), ms(pct(added, 99))
	r.UpstreamP50MS = ms(pct(up, 50))
	return r
}

// finish sets OK: nothing lost, nothing wrong, nothing repeated, and
// something answered.
func (r *report) finish() {
	r.OK = r.LostMessages == 0 && r.WrongAnswers == 0 && r.RepeatedEffects == 0 && r.TurnsAnswered > 0
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// write writes the report: as text to out, and as JSON to jsonOut ("-":
// to out instead of the text).
func (r *report) write(jsonOut string, out io.Writer) error {
	if jsonOut != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if jsonOut == "-" {
			_, err = out.Write(b)
			return err
		}
		if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	_, err := io.WriteString(out, r.text())
	return err
}

func (r *report) text() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.OK {
		verdict = "FAIL"
	}
	if r.BreakDedup {
		verdict += " (control: -break-dedup, repeated effects expected)"
	}
	f := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	f("tulip serve load test: %s", verdict)
	f("  lost messages:                       %d", r.LostMessages)
	f("  wrong answers:                       %d (of which refunds missing at billing: %d)", r.WrongAnswers, r.MissingRefunds)
	f("  effects repeated at billing:         %d", r.RepeatedEffects)
	f("  conversations:                       %d, %d workers, %.0fs of load, upstream delay %.0f ms, think %.0f ms",
		r.Conversations, r.Workers, r.DurationS, r.UpstreamMS, r.ThinkMS)
	f("  turns answered:                      %d of %d sent (%.1f/s; %d after -turn-timeout), %d threads, %d model calls",
		r.TurnsAnswered, r.TurnsSent, r.TurnsPerSecond, r.LateAnswers, r.ThreadsMade, r.ModelCalls)
	f("  latency p50 / p99 / max:             %.0f / %.0f / %.0f ms", r.LatencyP50MS, r.LatencyP99MS, r.LatencyMaxMS)
	f("  added over the upstream p50 / p99:   %.0f / %.0f ms (upstream per turn p50 %.0f ms)", r.AddedP50MS, r.AddedP99MS, r.UpstreamP50MS)
	f("  serve memory per open thread:        %.1f KiB (RSS of both: %.0f MiB idle, %.0f MiB peak; %d threads open at once)",
		r.MemPerOpenThreadKB, r.ServeRSSBaselineMB, r.ServeRSSPeakMB, r.OpenThreadsPeak)
	f("  serve RSS peak / end each:           %s / %s MiB", mbs(r.ServeRSSPeakEachMB), mbs(r.ServeRSSEndEachMB))
	f("  billing:                             %d refunds made, %d requests (%d body re-runs under the same key)",
		r.RefundsMade, r.RefundRequests, r.BodyReruns)
	f("  nemesis:                             %d worker kills, %d serve restarts (out of rotation %.1f s)",
		r.WorkerKills, r.ServeRestarts, r.RestartDowntime/1000)
	f("  streams:                             %d cut by shutdown, %d broken, %d resumes (GET starting_after)",
		r.ShutdownCuts, r.BrokenStreams, r.Resumes)
	f("  sent again:                          %d keyed first messages, %d refused (409/429), %d no instance took",
		r.ResentKeyed, r.ResentRefused, r.ResentNotSent)
	f("  proxy:                               %d failovers, %d ambiguous 502s, %d 503s", r.ProxyFailovers, r.ProxyAmbiguous, r.ProxyNotSent)
	f("  machine CPU:                         %.0f%% busy, %.0f%% this test's processes", r.MachineBusyPct, r.OwnCPUPct)
	for _, s := range r.LostSamples {
		f("  lost: %s", s)
	}
	for _, s := range r.WrongSamples {
		f("  wrong: %s", s)
	}
	return b.String()
}

func mbs(v []float64) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(parts, ", ")
}
