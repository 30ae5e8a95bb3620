package soak

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tulip-temporal/tulip/internal/protocol"
)

// Attempt phases.
const (
	PhaseStart = "start"
	PhaseEnd   = "end"
	// PhaseEffectKill: the worker kills itself now, after the effect
	// (Options.EffectKills).
	PhaseEffectKill = "effect_kill"
)

// Attempt is one line of the attempts file the soak's workers share: an
// activity attempt that started or ended on worker process Pid.
type Attempt struct {
	Phase    string `json:"p"`
	Type     string `json:"type"`
	Workflow string `json:"wf"`
	Run      string `json:"run"`
	Activity string `json:"act"`
	Attempt  int    `json:"n"`
	At       int64  `json:"at"` // Unix nanoseconds
	Pid      int    `json:"pid"`
}

// Kill is a worker process the nemesis SIGKILLed, and when.
type Kill struct {
	Pid int
	At  time.Time
}

// Recovery is what Recoveries measured: for each tool or model activity
// attempt in flight on a killed worker, the time from the kill to the start
// of its next attempt.
type Recovery struct {
	Samples     []time.Duration // sorted
	Unrecovered []string        // "workflow/run/activity#attempt" with no later attempt
	// EffectKills counts the workers that killed themselves after an
	// effect.
	EffectKills int
}

// Percentile is the q-quantile (0 < q <= 1) of the samples, nearest rank;
// 0 without samples.
func (r Recovery) Percentile(q float64) time.Duration {
	if len(r.Samples) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(r.Samples)))) - 1
	return r.Samples[max(0, min(k, len(r.Samples)-1))]
}

// counted says whether an activity type is a call: a tool or the model.
func counted(activityType string) bool {
	return activityType == protocol.ModelActivity || strings.HasPrefix(activityType, protocol.ToolActivityPrefix)
}

// Recoveries reads the attempts file twice (open gives it from its start),
// holding only the attempts in flight on killed workers: linear in the
// file, bounded by the kills.
func Recoveries(open func() (io.ReadCloser, error), kills []Kill) (Recovery, error) {
	killed := map[int]time.Time{}
	for _, k := range kills {
		killed[k.Pid] = k.At
	}
	type inflight struct {
		attempt int
		killAt  time.Time
		retry   int64 // the next attempt's start, 0: none yet
		next    int
		before  bool // a later attempt started before the kill: not in flight
		tool    string
	}
	byRun := map[string][]*inflight{} // workflow/run -> its tool attempts in flight
	open1 := map[string]*inflight{}   // activity|attempt -> in flight
	effectKills := 0
	err := scanAttempts(open, func(a Attempt) {
		if a.Phase == PhaseEffectKill {
			effectKills++
			return
		}
		at, ok := killed[a.Pid]
		if !ok || !counted(a.Type) {
			return
		}
		key := a.Workflow + "/" + a.Run + "/" + a.Activity
		if a.Phase == PhaseStart {
			f := &inflight{attempt: a.Attempt, killAt: at, tool: strings.TrimPrefix(a.Type, protocol.ToolActivityPrefix)}
			open1[key] = f
			byRun[a.Workflow+"/"+a.Run] = append(byRun[a.Workflow+"/"+a.Run], f)
		} else if f := open1[key]; f != nil && f.attempt == a.Attempt {
			delete(open1, key)
		}
	})
	if err != nil || len(open1) == 0 {
		return Recovery{EffectKills: effectKills}, err
	}
	err = scanAttempts(open, func(a Attempt) {
		if check, ok := strings.CutPrefix(a.Type, "tulip.check."); ok && a.Phase == PhaseStart {
			// A tool that checks its lost attempts recovers by its check
			// (the attempt's activity ends): its first check after the
			// kill is the retry.
			for _, f := range byRun[a.Workflow+"/"+a.Run] {
				if f.tool == check && a.At >= f.killAt.UnixNano() && (f.retry == 0 || a.At < f.retry) {
					f.retry, f.next = a.At, 1
				}
			}
			return
		}
		f := open1[a.Workflow+"/"+a.Run+"/"+a.Activity]
		if f == nil || a.Phase != PhaseStart || a.Attempt <= f.attempt {
			return
		}
		if a.At < f.killAt.UnixNano() {
			f.before = true // the server had retried it already
			return
		}
		if f.retry == 0 || a.Attempt < f.next {
			f.retry, f.next = a.At, a.Attempt
		}
	})
	rec := Recovery{EffectKills: effectKills}
	for key, f := range open1 {
		if f.before {
			continue
		}
		if f.retry == 0 {
			rec.Unrecovered = append(rec.Unrecovered, key)
			continue
		}
		rec.Samples = append(rec.Samples, time.Unix(0, f.retry).Sub(f.killAt))
	}
	sort.Slice(rec.Samples, func(a, b int) bool { return rec.Samples[a] < rec.Samples[b] })
	sort.Strings(rec.Unrecovered)
	return rec, err
}

// scanAttempts calls fn for each well-formed line (a worker killed
// mid-write may leave a torn one).
func scanAttempts(open func() (io.ReadCloser, error), fn func(Attempt)) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var a Attempt
		if json.Unmarshal(sc.Bytes(), &a) == nil && a.Phase != "" {
			fn(a)
		}
	}
	return sc.Err()
}
