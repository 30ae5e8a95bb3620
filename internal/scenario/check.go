package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Expect is a conformance case's expectations (docs/scenarios.md).
type Expect struct {
	Outcomes        map[string]string `json:"outcomes"`
	BodyInvocations map[string]int    `json:"body_invocations"`
	ErrorContains   map[string]string `json:"error_contains"`
	SameResult      [][2]string       `json:"same_result"`
	DifferentResult [][2]string       `json:"different_result"`
	Status          map[string]string `json:"status"`
	// NearMiss expects a call's near_miss (the last line of its id): its
	// reason, and when given its record and the paths of its differences,
	// in order; null expects none.
	NearMiss map[string]*NearMissExpect `json:"near_miss"`
}

// NearMissExpect is one call's expected near_miss.
type NearMissExpect struct {
	Reason string   `json:"reason"`
	Record *int     `json:"record"`
	Paths  []string `json:"paths"`
}

// LoadCases reads every conformance case (*.json) in dir, sorted by name.
func LoadCases(dir string) ([]Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Case
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c Case
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Check compares a trace (its lines and summary) with a case's
// expectations, as the shared 'check' script does, and returns what
// differs. The last line of a call id is its final outcome.
func (c Case) Check(lines []Line, sum Summary) []string {
	var exp Expect
	if len(c.Expect) > 0 {
		if err := json.Unmarshal(c.Expect, &exp); err != nil {
			return []string{"unreadable expect: " + err.Error()}
		}
	}
	last := map[string]Line{}
	for _, l := range lines {
		last[l.CallID] = l
	}
	var errs []string
	for _, id := range sortedKeys(exp.Outcomes) {
		if got := string(last[id].Outcome); got != exp.Outcomes[id] {
			errs = append(errs, fmt.Sprintf("%s: outcome %q, want %q", id, got, exp.Outcomes[id]))
		}
	}
	for _, tool := range sortedKeys(exp.BodyInvocations) {
		if got := sum.BodyInvocations[tool]; got != exp.BodyInvocations[tool] {
			errs = append(errs, fmt.Sprintf("%s body ran %d times, want %d", tool, got, exp.BodyInvocations[tool]))
		}
	}
	for _, id := range sortedKeys(exp.ErrorContains) {
		e := ""
		if last[id].Error != nil {
			e = *last[id].Error
		}
		if !strings.Contains(strings.ToLower(e), strings.ToLower(exp.ErrorContains[id])) {
			errs = append(errs, fmt.Sprintf("%s: error %q lacks %q", id, e, exp.ErrorContains[id]))
		}
	}
	for _, p := range exp.SameResult {
		a, b := decode(last[p[0]].Result), decode(last[p[1]].Result)
		if a == nil || !reflect.DeepEqual(a, b) {
			errs = append(errs, fmt.Sprintf("%s and %s: results %s / %s should be equal", p[0], p[1], last[p[0]].Result, last[p[1]].Result))
		}
	}
	for _, p := range exp.DifferentResult {
		a, b := decode(last[p[0]].Result), decode(last[p[1]].Result)
		if a == nil || reflect.DeepEqual(a, b) {
			errs = append(errs, fmt.Sprintf("%s and %s: results %s / %s should differ", p[0], p[1], last[p[0]].Result, last[p[1]].Result))
		}
	}
	for _, id := range sortedKeys(exp.NearMiss) {
		want, got := exp.NearMiss[id], last[id].NearMiss
		switch {
		case want == nil && got != nil:
			errs = append(errs, fmt.Sprintf("%s: near miss %s, want none", id, got))
		case want == nil:
		case got == nil:
			errs = append(errs, fmt.Sprintf("%s: no near miss, want reason %q", id, want.Reason))
		default:
			var paths []string
			for _, d := range got.Differences {
				paths = append(paths, d.Path)
			}
			if string(got.Reason) != want.Reason || (want.Record != nil && *want.Record != got.Record) ||
				(want.Paths != nil && strings.Join(paths, " ") != strings.Join(want.Paths, " ")) {
				errs = append(errs, fmt.Sprintf("%s: near miss %q (record %d, paths %v), want %q (record %v, paths %v)",
					id, got.Reason, got.Record, paths, want.Reason, fmtPtr(want.Record), want.Paths))
			}
		}
	}
	status := map[string]string{}
	for _, r := range sum.Runs {
		status[strconv.Itoa(r.Run)] = r.Status
	}
	for _, idx := range sortedKeys(exp.Status) {
		if status[idx] != exp.Status[idx] {
			errs = append(errs, fmt.Sprintf("run %s: status %q, want %q", idx, status[idx], exp.Status[idx]))
		}
	}
	return errs
}

func fmtPtr(p *int) string {
	if p == nil {
		return "any"
	}
	return strconv.Itoa(*p)
}

func decode(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
