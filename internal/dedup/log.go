package dedup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Origin says how a record came to be.
type Origin string

// The origins of a record.
const (
	// Executed: the tool body ran for this call; its result or final error
	// is the outcome.
	Executed Origin = "executed"
	// Cached: a matching earlier record's outcome was served from the
	// log; the body did not run. The same word as the trace's outcome.
	Cached Origin = "cached"
	// servedBefore is Cached as records written before it spelled it:
	// read as Cached.
	servedBefore Origin = "served"
	// Cancelled: a before-hook cancelled the call; the cancel message is the
	// outcome and the arguments are the model's (pre-hook).
	Cancelled Origin = "cancelled"
)

// ErrorTypeCancelled is the ToolError type of a cancelled call's outcome.
const ErrorTypeCancelled = "tulip.Cancelled"

// ToolError is a recorded failure: the body's final error, or a cancel
// message. A failure is an outcome like any other and is served again.
type ToolError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *ToolError) Error() string { return e.Message }

// Relation names the rule under which a call matched a record.
type Relation string

// The relations of docs/rules.md.
const (
	NoMatch Relation = ""
	// EarlierTurn: value equality against a record of an earlier response
	// (a reloaded checkpoint included).
	EarlierTurn Relation = "earlier_turn"
	// SameResponse: sorted-key JSON against an earlier call of the same
	// response.
	SameResponse Relation = "same_response"
	// FromOrigin: in a fork, value equality against a call the forked
	// thread made after the fork's point (its origin's log), served once
	// (docs/forks.md). Not a rule of docs/rules.md: no body ran for it in
	// the fork, and none is run.
	FromOrigin Relation = "origin"
)

// Record is one entry of the execution log.
type Record struct {
	// Seq is the record's position in the log, from 0.
	Seq int `json:"seq"`
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Arguments is the argument text compared for dedup: post-hook for
	// executed and served records, the model's own for cancelled ones.
	Arguments string `json:"arguments"`
	// Response numbers the model response the call came from, across the
	// whole log (a reloaded checkpoint's responses come first).
	Response int `json:"response"`
	// Run identifies the agent run (workflow run) that made the record.
	Run string `json:"run,omitempty"`
	// Turn is the 1-based model response within its run.
	Turn int `json:"turn"`
	// CallID is the model's tool-call id.
	CallID string `json:"call_id"`
	// Origin says how the record came to be.
	Origin Origin `json:"origin"`
	// Result is the body's JSON result, when it succeeded.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the failure (or cancel message), when there is one.
	Error *ToolError `json:"error,omitempty"`
	// ServedFrom is the Seq of the record a served call was served from.
	ServedFrom *int `json:"served_from,omitempty"`
	// Relation is the rule a served call matched under.
	Relation Relation `json:"relation,omitempty"`
	// Key is the downstream idempotency key the execution carried.
	Key string `json:"key,omitempty"`
	// ArgsHash is ArgsHash of the arguments, in a thin record: one whose
	// content another run holds (Holder). Its Arguments are "", its Result
	// may be left out (see ResultIn), and it matches by this hash, which is
	// exact for value equality.
	ArgsHash string `json:"args_hash,omitempty"`
	// Holder is the workflow run whose history (and memory, on replay)
	// holds a thin record in full, when it is not Run (the run that made
	// it): ask it for the record's arguments. See HeldBy.
	Holder string `json:"holder,omitempty"`
	// ResultIn says the record's result is the content of that message of
	// the thread's conversation (counted from 0 across its runs): set on a
	// thin record whose result was too large to carry, and on a record
	// served from one.
	ResultIn *int `json:"result_in,omitempty"`
	// NearMiss, on an executed record of a tool that already had records,
	// names the nearest of them and why it did not serve the call
	// (docs/rules.md, "Why did it run again?"). A thin record leaves it out
	// (its holder's record has it).
	NearMiss *NearMiss `json:"near_miss,omitempty"`
	// Unknown, on an executed record of a tool that checks or holds its
	// unknown outcomes, says an attempt's outcome was unknown and how the
	// run resolved it (docs/unknown.md). A thin record leaves it out (its
	// holder's record has it).
	Unknown *Unknown `json:"unknown,omitempty"`

	args       *Args
	vh         uint64 // the index hash
	next, prev int32  // the records before and after it with the same hash, or -1
	pending    bool   // appended before its outcome is known
}

// Args returns the record's parsed arguments (nil for a thin record).
func (r *Record) Args() *Args { return r.args }

// HeldBy is the run that holds a thin record in full: Holder, or Run.
func (r *Record) HeldBy() string {
	if r.Holder != "" {
		return r.Holder
	}
	return r.Run
}

// Thin reports whether the record is thin: its content is held by another
// run (HeldBy), and it matches by ArgsHash.
func (r *Record) Thin() bool { return r.args == nil && r.ArgsHash != "" }

// SameCall reports whether r is a call of tool with arguments equal to
// args by the value model (a thin record's by its hash, which is exact for
// value equality).
func (r *Record) SameCall(tool string, args *Args) bool {
	switch {
	case r.Tool != tool:
		return false
	case r.args != nil:
		return r.args.ValueEqual(args)
	default:
		return r.ArgsHash != "" && r.ArgsHash == args.ArgsHash()
	}
}

// Pending reports whether the record's outcome is not known yet (a call
// still executing, or served from one that is).
func (r *Record) Pending() bool { return r.pending }

// Settle sets a pending record's outcome: a result, or an error.
func (r *Record) Settle(result []byte, err *ToolError) {
	r.Result, r.Error, r.pending = result, err, false
}

// Log is the execution log of one agent (the seed's tool_executions): ordered
// records, indexed by a hash of the value-equality encoding. That one hash
// serves both relations: calls equal by sorted-key JSON are also equal by
// value (the fuzz tests check it), so their records share a hash. It is not
// safe for concurrent use; a workflow's coroutines never run at once.
type Log struct {
	recs      []*Record // nil for a thin record (thinRecs holds it)
	byHash    map[uint64]chain
	responses int
	hs        *hasher
	// thinRecs are the thin records, compactly (thin.go): records [0,
	// len(thinRecs)). Thin records come before every full one (a run
	// inherits them), so a thin match is always the earliest of its
	// earlier-turn matches.
	thinRecs []thinRec
	// thinIdx indexes thinRecs by ArgsHash and tool (thin.go), built for
	// the first thinIdxOf of them.
	thinIdx   []int32
	thinIdxOf int
	// names are the thin records' names, numbered.
	names   []string
	nameIdx map[string]uint16
	// text holds the thin records' call ids, keys and results.
	text strings.Builder
	// byTool lists each tool's records in log order, for NearestMiss.
	byTool map[string][]int32
}

// chain links the records that share a hash, oldest first, through the
// records themselves: a lookup allocates nothing and an append one record.
type chain struct{ head, tail int32 }

// NewLog returns an empty log.
func NewLog() *Log {
	return &Log{byHash: map[uint64]chain{}, hs: newHasher(), byTool: map[string][]int32{}}
}

// Len is the number of records.
func (l *Log) Len() int { return len(l.recs) }

// ThinLen is the number of thin records: records [0, ThinLen()) are thin,
// and never change.
func (l *Log) ThinLen() int { return len(l.thinRecs) }

// At returns record i. The caller must not change it.
func (l *Log) At(i int) *Record { return l.rec(i) }

// Records returns copies of all records, in order.
func (l *Log) Records() []Record {
	out := make([]Record, len(l.recs))
	for i := range l.recs {
		out[i] = *l.rec(i)
	}
	return out
}

// BeginResponse starts the next model response and returns its number.
// Records appended after it belong to that response.
func (l *Log) BeginResponse() int {
	l.responses++
	return l.responses
}

// Response returns the current response number (0 before the first).
func (l *Log) Response() int { return l.responses }

// Append records a call. r.Seq is set; args must be r's parsed arguments
// (post-hook, or the model's for a cancelled call).
func (l *Log) Append(r Record, args *Args) *Record {
	r.Seq = len(l.recs)
	r.args = args
	if r.Arguments == "" {
		r.Arguments = args.Text()
	}
	rec := &r
	l.recs = append(l.recs, rec)
	l.index(rec)
	l.byTool[r.Tool] = append(l.byTool[r.Tool], int32(r.Seq))
	return rec
}

func (l *Log) index(r *Record) {
	seq := int32(r.Seq)
	r.next, r.prev = -1, -1
	r.vh = r.args.valueHashFor(l.hs, r.Tool)
	if c, ok := l.byHash[r.vh]; ok {
		l.recs[c.tail].next = seq
		r.prev = c.tail
		l.byHash[r.vh] = chain{c.head, seq}
	} else {
		l.byHash[r.vh] = chain{seq, seq}
	}
}

// AppendPending records a call whose outcome is not known yet (its body is
// executing); Record.Settle completes it. It matches later calls of the same
// response like any record.
func (l *Log) AppendPending(r Record, args *Args) *Record {
	rec := l.Append(r, args)
	rec.pending = true
	return rec
}

// FindMatchingExecution applies the two-step match of docs/rules.md for one call
// of an idempotent tool in response number response: first the earliest
// record of an earlier response that is value-equal, then the earliest
// record of the same response whose sorted-key JSON is equal. It returns nil
// and NoMatch when neither exists. It never scans the log: it walks only the
// records that share the call's hash.
func (l *Log) FindMatchingExecution(tool string, args *Args, response int) (*Record, Relation) {
	if len(l.thinRecs) > 0 {
		if i := l.findThin(tool, args.ArgsHash()); i >= 0 && l.thinRecs[i].responseOf() < response {
			return l.thinRecord(i), EarlierTurn
		}
	}
	c, ok := l.byHash[args.valueHashFor(l.hs, tool)]
	if !ok {
		return nil, NoMatch
	}
	// Chains run in log order, so earlier responses come first...
	for i := c.head; i >= 0 && l.recs[i].Response < response; i = l.recs[i].next {
		if r := l.recs[i]; r.Tool == tool && Equal(&r.args.val, &args.val) {
			return r, EarlierTurn
		}
	}
	// ...and this response's records are the tail: walk back over them and
	// keep the earliest that matches.
	var found *Record
	for i := c.tail; i >= 0 && l.recs[i].Response == response; i = l.recs[i].prev {
		if r := l.recs[i]; r.Tool == tool && SortedEqual(&r.args.val, &args.val) {
			found = r
		}
	}
	if found != nil {
		return found, SameResponse
	}
	return nil, NoMatch
}

// SnapshotVersion is the version written by Snapshot for a log of full
// records; a log holding thin records writes SnapshotVersionThin (which
// builds that read only SnapshotVersion refuse by name).
const (
	SnapshotVersion     = 1
	SnapshotVersionThin = 2
)

type snapshot struct {
	Version   int      `json:"version"`
	Responses int      `json:"responses"`
	Records   []Record `json:"records"`
}

// Snapshot encodes the log deterministically (versioned JSON), for workflow
// state and thread checkpoints. Restore reads it back exactly.
func (l *Log) Snapshot() ([]byte, error) { return l.snapshot(len(l.recs)) }

// Settled returns the number of records before the first pending one: the
// records whose outcomes are known.
func (l *Log) Settled() int {
	for i, r := range l.recs {
		if r != nil && r.pending {
			return i
		}
	}
	return len(l.recs)
}

// SnapshotSettled is Snapshot of the records before the first pending one
// (see Settled): what a run that stopped now has proven.
func (l *Log) SnapshotSettled() ([]byte, error) { return l.snapshot(l.Settled()) }

func (l *Log) snapshot(n int) ([]byte, error) {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = *l.rec(i)
	}
	return encodeSnapshot(l.responses, recs)
}

// ThinSnapshot is Snapshot of the first n records with every full record
// made thin: its arguments replaced by their ArgsHash, holder named as the
// run that holds it, and a result over inline bytes replaced by the message
// number resultIn gives (when it gives one). Thin records stay as they
// are. The records must be settled.
func (l *Log) ThinSnapshot(n int, holder string, inline int, resultIn func(r *Record) (int, bool)) ([]byte, error) {
	recs := make([]Record, n)
	for i := range recs {
		r := l.rec(i)
		rec := *r
		if !r.Thin() {
			rec.ArgsHash, rec.Arguments, rec.Holder, rec.NearMiss, rec.Unknown = r.args.ArgsHash(), "", holder, nil, nil
			if rec.Holder == rec.Run {
				rec.Holder = ""
			}
			if rec.ResultIn == nil && len(rec.Result) > inline {
				if k, ok := resultIn(r); ok {
					rec.Result, rec.ResultIn = nil, &k
				}
			}
		}
		recs[i] = rec
	}
	return encodeSnapshot(l.responses, recs)
}

func encodeSnapshot(responses int, recs []Record) ([]byte, error) {
	s := snapshot{Version: SnapshotVersion, Responses: responses, Records: recs}
	for _, r := range recs {
		if r.pending {
			return nil, fmt.Errorf("dedup: snapshot: record %d is still pending", r.Seq)
		}
		if r.Arguments == "" && r.ArgsHash != "" { // thin
			s.Version = SnapshotVersionThin
		}
		fields := []string{r.Tool, r.Arguments, r.Run, r.CallID, r.Key, r.Holder}
		if r.Error != nil {
			fields = append(fields, r.Error.Type, r.Error.Message)
		}
		for _, f := range fields {
			if !utf8.ValidString(f) {
				return nil, fmt.Errorf("dedup: snapshot: record %d holds text that is not valid UTF-8", r.Seq)
			}
		}
	}
	size := 64
	for i := range recs {
		r := &recs[i]
		size += 160 + len(r.Tool) + len(r.Arguments) + len(r.Run) + len(r.CallID) + len(r.Result) + len(r.Key) + len(r.ArgsHash) + len(r.Holder)
	}
	return appendSnapshot(make([]byte, 0, size), &s), nil
}

// ErrSnapshot is wrapped by every Restore error.
var ErrSnapshot = errors.New("dedup: invalid snapshot")

// restoreLimits accepts whatever an earlier run accepted.
var restoreLimits = Limits{MaxDepth: maxDepthCap, MaxBytes: 1 << 30}

// Restore decodes a Snapshot and rebuilds the index.
func Restore(data []byte) (*Log, error) {
	var s snapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	if s.Version != SnapshotVersion && s.Version != SnapshotVersionThin {
		return nil, fmt.Errorf("%w: version %d, this build reads %d and %d", ErrSnapshot, s.Version, SnapshotVersion, SnapshotVersionThin)
	}
	return FromRecords(s.Responses, s.Records)
}

// FromRecords rebuilds a log from its records (as Records returned them)
// and its response count, checking them as Restore does.
func FromRecords(responses int, records []Record) (*Log, error) {
	l := NewLog()
	l.responses = responses
	thin, text := 0, 0
	for i := range records {
		if r := &records[i]; r.Arguments == "" && r.ArgsHash != "" {
			thin++
			text += len(r.CallID) + len(r.Key) + len(r.Result)
		}
	}
	l.recs, l.thinRecs = make([]*Record, 0, len(records)), make([]thinRec, 0, thin)
	l.text.Grow(text)
	s := snapshot{Responses: responses, Records: records}
	// The records' few distinct names (tools, runs, origins) are kept once
	// each, not once a record as decoding left them.
	names := map[string]string{}
	intern := func(p *string) {
		if *p == "" {
			return
		}
		if v, ok := names[*p]; ok {
			*p = v
			return
		}
		names[*p] = *p
	}
	for i, r := range s.Records {
		if r.Origin == servedBefore {
			r.Origin = Cached
		}
		intern(&r.Tool)
		intern(&r.Run)
		intern(&r.Holder)
		intern((*string)(&r.Origin))
		intern((*string)(&r.Relation))
		if r.Seq != i {
			return nil, fmt.Errorf("%w: record %d has seq %d", ErrSnapshot, i, r.Seq)
		}
		if r.Response > s.Responses {
			return nil, fmt.Errorf("%w: record %d is of response %d, after the last (%d)", ErrSnapshot, i, r.Response, s.Responses)
		}
		if r.Arguments == "" && r.ArgsHash != "" {
			if err := l.appendThin(r); err != nil {
				return nil, fmt.Errorf("%w: record %d: %v", ErrSnapshot, i, err)
			}
			continue
		}
		args, err := Parse(r.Arguments, restoreLimits)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrSnapshot, i, err)
		}
		r.ArgsHash = ""
		l.Append(r, args)
	}
	return l, nil
}

// appendThin appends a thin record. Thin records come first: a log holds
// them before any full one.
func (l *Log) appendThin(r Record) error {
	if len(l.recs) > len(l.thinRecs) {
		return errors.New("a thin record after a full one")
	}
	if len(r.ArgsHash) != 64 {
		return errors.New("args_hash is not a SHA-256 in hex")
	}
	if r.HeldBy() == "" {
		return errors.New("a thin record names no holder")
	}
	r.Seq = len(l.recs)
	l.recs = append(l.recs, nil)
	t, _ := l.compact(&r)
	l.thinRecs = append(l.thinRecs, t)
	l.byTool[r.Tool] = append(l.byTool[r.Tool], int32(r.Seq))
	return nil
}
