package dedup

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// NearMissReason says why a call that ran was not served by the record
// nearest to it.
type NearMissReason string

// The reasons of docs/rules.md ("Why did it run again?").
const (
	// ReasonArguments: the arguments differ in value from every record of
	// the tool; Differences says where, against the nearest.
	ReasonArguments NearMissReason = "arguments"
	// ReasonNotIdempotent: a record with equal arguments exists, but the
	// tool is not declared idempotent: it runs every time.
	ReasonNotIdempotent NearMissReason = "not_idempotent"
	// ReasonAfterResume: a record with equal arguments exists, but the run
	// was resumed after an interrupt (or the call was held and performed):
	// the contract turns matching off for the rest of the run.
	ReasonAfterResume NearMissReason = "after_resume"
	// ReasonSameResponse: an earlier call of the same response has equal
	// values but not equal sorted-key JSON (120 and 120.0): within one
	// response they are different calls.
	ReasonSameResponse NearMissReason = "same_response"
	// ReasonHook: the call as the model emitted it equals the record, but
	// a hook rewrote it, and records hold post-hook arguments (a hook
	// installed later does not rewrite what is already recorded).
	ReasonHook NearMissReason = "hook"
)

// NearMiss names the record nearest to a call that ran, and why it did not
// serve the call.
type NearMiss struct {
	// Record is the nearest record's Seq; CallID its call.
	Record int            `json:"record"`
	CallID string         `json:"call_id"`
	Reason NearMissReason `json:"reason"`
	// Differences, for ReasonArguments (and ReasonHook), are the first few
	// places the arguments differ, by the value model (120 and 120.0 are
	// never a difference): a JSON Pointer, and the record's value (Was)
	// and the call's (Now); a member one side lacks has no Was or no Now.
	// Empty when the nearest record is thin (its values held by another
	// run).
	Differences []Difference `json:"differences,omitempty"`
	// Distance is how many values differ (Differences shows at most
	// MaxDifferences of them).
	Distance int `json:"distance,omitempty"`
}

// Difference is one place two argument objects differ.
type Difference struct {
	Path string          `json:"path"`
	Was  json.RawMessage `json:"was,omitempty"`
	Now  json.RawMessage `json:"now,omitempty"`
}

// Bounds of near-miss search: records of the tool looked at (the latest),
// differences listed, and a listed value's size (a longer one is cut and
// says its length).
const (
	NearMissCandidates = 64
	MaxDifferences     = 3
	maxDiffValue       = 256
)

// NearestMiss explains a call of tool with args that ran (no record served
// it) in response number response: the record of the tool nearest to it
// among those before seq before, and why it did not serve the call.
// idempotent and matching say whether the call could be served at all (an
// idempotent tool, in a run not continued by resume); pre, when a hook
// rewrote the call, is its arguments as the model emitted them. Nil when
// the tool has no earlier record. It reads only the log (deterministic),
// and at most NearMissCandidates records besides the ones with equal
// arguments. The nearest differs in the fewest values; of equally near
// records, the latest.
func (l *Log) NearestMiss(tool string, args, pre *Args, response, before int, idempotent, matching bool) *NearMiss {
	seqs := l.byTool[tool]
	for len(seqs) > 0 && int(seqs[len(seqs)-1]) >= before {
		seqs = seqs[:len(seqs)-1]
	}
	if len(seqs) == 0 {
		return nil
	}
	if rec := l.equalRecord(tool, args, before); rec != nil {
		nm := &NearMiss{Record: rec.Seq, CallID: rec.CallID}
		switch {
		case !idempotent:
			nm.Reason = ReasonNotIdempotent
		case !matching:
			nm.Reason = ReasonAfterResume
		default:
			nm.Reason = ReasonSameResponse // equal values, another sorted-key JSON
		}
		return nm
	}
	if pre != nil {
		if rec := l.equalRecord(tool, pre, before); rec != nil {
			nm := &NearMiss{Record: rec.Seq, CallID: rec.CallID, Reason: ReasonHook}
			nm.Differences, nm.Distance = Diff(rec.args, args)
			return nm
		}
	}
	var best *Record
	bestDist := -1
	for i := len(seqs) - 1; i >= 0 && i >= len(seqs)-NearMissCandidates; i-- {
		if int(seqs[i]) < len(l.thinRecs) {
			continue
		}
		rec := l.recs[seqs[i]]
		limit := bestDist - 1 // only a nearer record counts
		if bestDist < 0 {
			limit = int(^uint(0) >> 1)
		}
		if d := distance(&rec.args.val, &args.val, limit); d <= limit {
			best, bestDist = rec, d
		}
		if bestDist == 1 {
			// None is nearer: a record whose values all equal the call's
			// is equalRecord's, above. Of equally near, this is the latest.
			break
		}
	}
	if best == nil { // only thin records: their values are held elsewhere
		rec := l.rec(int(seqs[len(seqs)-1]))
		return &NearMiss{Record: rec.Seq, CallID: rec.CallID, Reason: ReasonArguments}
	}
	nm := &NearMiss{Record: best.Seq, CallID: best.CallID, Reason: ReasonArguments}
	nm.Differences, nm.Distance = Diff(best.args, args)
	return nm
}

// distance counts the values in which a and b differ, as Diff does, but
// stops once the count passes limit; it allocates only for big objects.
func distance(a, b *Value, limit int) int {
	switch {
	case a.kind == Object && b.kind == Object:
		inA, inB := a.Get, b.Get
		if len(a.obj) > 16 || len(b.obj) > 16 {
			inA, inB = memberIndex(a), memberIndex(b)
		}
		n := 0
		for i := range a.obj {
			if bv := inB(a.obj[i].Key); bv == nil {
				n++
			} else {
				n += distance(&a.obj[i].Value, bv, limit-n)
			}
			if n > limit {
				return n
			}
		}
		for i := range b.obj {
			if inA(b.obj[i].Key) == nil {
				n++
			}
		}
		return n
	case a.kind == Array && b.kind == Array:
		n := 0
		for i := 0; i < len(a.arr) || i < len(b.arr); i++ {
			if i >= len(a.arr) || i >= len(b.arr) {
				n++
			} else {
				n += distance(&a.arr[i], &b.arr[i], limit-n)
			}
			if n > limit {
				return n
			}
		}
		return n
	case Equal(a, b):
		return 0
	}
	return 1
}

// equalRecord is the latest record of tool before seq before whose
// arguments are value-equal to args.
func (l *Log) equalRecord(tool string, args *Args, before int) *Record {
	var found *Record
	if c, ok := l.byHash[args.valueHashFor(l.hs, tool)]; ok {
		for i := c.head; i >= 0 && int(i) < before; i = l.recs[i].next {
			if r := l.recs[i]; r.Tool == tool && Equal(&r.args.val, &args.val) {
				found = r
			}
		}
	}
	if found == nil && len(l.thinRecs) > 0 {
		if i := l.findThin(tool, args.ArgsHash()); i >= 0 && i < before {
			found = l.thinRecord(i)
		}
	}
	return found
}

// Diff lists where two argument objects differ by the value model (at
// most MaxDifferences entries), and how many values differ in all.
func Diff(was, now *Args) ([]Difference, int) {
	var out []Difference
	n := diffValue(&was.val, &now.val, "", &out)
	return out, n
}

func diffValue(a, b *Value, path string, out *[]Difference) int {
	switch {
	case a.kind == Object && b.kind == Object:
		n := 0
		var buf [16]string // most objects' names fit: no allocation
		for _, k := range memberNames(buf[:0], a, b) {
			av, bv := a.Get(k), b.Get(k)
			switch {
			case av == nil || bv == nil:
				n += add(out, path+"/"+pointerToken(k), av, bv)
			case (av.kind == Object && bv.kind == Object) || (av.kind == Array && bv.kind == Array):
				n += diffValue(av, bv, path+"/"+pointerToken(k), out)
			case !Equal(av, bv):
				n += add(out, path+"/"+pointerToken(k), av, bv)
			}
		}
		return n
	case a.kind == Array && b.kind == Array:
		n := 0
		for i := 0; i < len(a.arr) || i < len(b.arr); i++ {
			switch {
			case i >= len(a.arr):
				n += add(out, path+"/"+strconv.Itoa(i), nil, &b.arr[i])
			case i >= len(b.arr):
				n += add(out, path+"/"+strconv.Itoa(i), &a.arr[i], nil)
			default:
				av, bv := &a.arr[i], &b.arr[i]
				if (av.kind == Object && bv.kind == Object) || (av.kind == Array && bv.kind == Array) || !Equal(av, bv) {
					n += diffValue(av, bv, path+"/"+strconv.Itoa(i), out)
				}
			}
		}
		return n
	case Equal(a, b):
		return 0
	}
	return add(out, path, a, b)
}

// memberNames appends to names the names of a's and b's members, each
// once, sorted.
func memberNames(names []string, a, b *Value) []string {
	if len(a.obj)+len(b.obj) > 32 {
		seen := map[string]bool{}
		for _, v := range []*Value{a, b} {
			for i := range v.obj {
				if k := v.obj[i].Key; !seen[k] {
					seen[k] = true
					names = append(names, k)
				}
			}
		}
	} else {
		for _, v := range []*Value{a, b} {
			for i := range v.obj {
				if k := v.obj[i].Key; !slices.Contains(names, k) {
					names = append(names, k)
				}
			}
		}
	}
	sortStrings(names)
	return names
}

// add counts one difference, and lists it (was or now nil: a side lacks
// it) while fewer than MaxDifferences are listed.
func add(out *[]Difference, path string, was, now *Value) int {
	if len(*out) < MaxDifferences {
		d := Difference{Path: path}
		if was != nil {
			d.Was = cut(was)
		}
		if now != nil {
			d.Now = cut(now)
		}
		*out = append(*out, d)
	}
	return 1
}

// cut is v's JSON, or for a long value a string that begins it and says
// how long it is.
func cut(v *Value) json.RawMessage {
	switch v.kind {
	case Int, Float: // as written
		if len(v.lit) <= maxDiffValue {
			return json.RawMessage(v.lit)
		}
	case String: // most need no escape: one copy
		if len(v.lit) <= maxDiffValue-2 && plainASCII(v.lit) {
			b := make([]byte, len(v.lit)+2)
			b[0], b[len(b)-1] = '"', '"'
			copy(b[1:], v.lit)
			return b
		}
	}
	s := v.JSON()
	if len(s) <= maxDiffValue {
		return json.RawMessage(s)
	}
	head := s[:maxDiffValue-64]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	b, _ := json.Marshal(fmt.Sprintf("%s… (%d bytes)", head, len(s)))
	return b
}

// plainASCII reports whether s is ASCII that a JSON string holds as
// itself (writeASCII writes it unescaped).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// memberIndex is Get of a big object, through a map.
func memberIndex(v *Value) func(string) *Value {
	m := make(map[string]*Value, len(v.obj))
	for i := range v.obj {
		if _, dup := m[v.obj[i].Key]; !dup {
			m[v.obj[i].Key] = &v.obj[i].Value
		}
	}
	return func(k string) *Value { return m[k] }
}

// pointerToken escapes a member name for a JSON Pointer (RFC 6901).
func pointerToken(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return pointerEscaper.Replace(k)
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// String says the near miss in words, as tulip inspect shows it:
// "nearest: record 0, /amount 120.0 → 120.5".
func (nm *NearMiss) String() string {
	head := "nearest: record " + strconv.Itoa(nm.Record)
	switch nm.Reason {
	case ReasonNotIdempotent:
		return head + ", same arguments, tool not idempotent"
	case ReasonAfterResume:
		return head + ", same arguments, no matching after a resume"
	case ReasonSameResponse:
		return head + ", same values in one response (sorted-key JSON differs)"
	case ReasonHook:
		return head + ", before a hook rewrote " + differences(nm)
	}
	if len(nm.Differences) == 0 {
		return head + ", other arguments"
	}
	return head + ", " + differences(nm)
}

func differences(nm *NearMiss) string {
	parts := make([]string, 0, len(nm.Differences)+1)
	for _, d := range nm.Differences {
		was, now := string(d.Was), string(d.Now)
		if was == "" {
			was = "(none)"
		}
		if now == "" {
			now = "(none)"
		}
		parts = append(parts, d.Path+" "+was+" → "+now)
	}
	if more := nm.Distance - len(nm.Differences); more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	return strings.Join(parts, ", ")
}

// Candidate is one record ranked against a call by Rank.
type Candidate struct {
	Record   int    `json:"record"`
	CallID   string `json:"call_id"`
	Response int    `json:"response"`
	Origin   Origin `json:"origin"`
	// Distance is how many values differ (0: value-equal arguments);
	// Differences lists the first MaxDifferences of them.
	Distance    int          `json:"distance"`
	Differences []Difference `json:"differences,omitempty"`
}

// Rank compares args with every record of tool before seq before, and
// returns them nearest first (fewest differing values; of equally near
// records, the latest first). Thin records, whose values another run
// holds, are left out. Unlike NearestMiss it is not bounded: it is for
// tools (tulip explain), not for workflow code.
func (l *Log) Rank(tool string, args *Args, before int) []Candidate {
	var out []Candidate
	for _, s := range l.byTool[tool] {
		if int(s) >= before || int(s) < len(l.thinRecs) {
			continue
		}
		rec := l.recs[s]
		d, n := Diff(rec.args, args)
		out = append(out, Candidate{Record: rec.Seq, CallID: rec.CallID, Response: rec.Response, Origin: rec.Origin, Distance: n, Differences: d})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Distance != out[j].Distance {
			return out[i].Distance < out[j].Distance
		}
		return out[i].Record > out[j].Record
	})
	return out
}

// DifferencesText says a candidate's differences in words: "/amount
// 120.0 → 120.5, 1 more", or "same values".
func (c Candidate) DifferencesText() string {
	if c.Distance == 0 {
		return "same values"
	}
	return differences(&NearMiss{Differences: c.Differences, Distance: c.Distance})
}
