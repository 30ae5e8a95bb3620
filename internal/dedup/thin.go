package dedup

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
)

// Thin records (Record.Thin) come first in a log and never change: a log
// keeps them compactly, not as Records. A thin record's argument hash is
// kept as its 32 bytes, its names (tool, run, holder, origin, relation) as
// numbers into the log's table of names, and what it rarely has (an error,
// a served-from or result-in, a near miss) behind one pointer. At and
// Records give a Record built from it, with the same fields (and JSON) as
// the record it was restored from.

// thinRec is a thin record as the log holds it.
type thinRec struct {
	hash     [32]byte // ArgsHash decoded (see thinExtra.argsHash)
	callID   string
	key      string
	result   json.RawMessage
	response int
	turn     int
	tool     uint32 // names
	run      uint32
	holder   uint32
	origin   uint32
	relation uint32
	extra    *thinExtra
}

// thinExtra is what few thin records have.
type thinExtra struct {
	err        *ToolError
	servedFrom *int
	resultIn   *int
	nearMiss   *NearMiss
	// argsHash is ArgsHash when it is not 64 lowercase hex digits (such a
	// record never matches a call: ArgsHash is lowercase hex).
	argsHash string
}

// name returns the number of s in the log's table of names.
func (l *Log) name(s string) uint32 {
	if i, ok := l.nameIdx[s]; ok {
		return i
	}
	if l.nameIdx == nil {
		l.nameIdx = map[string]uint32{}
	}
	i := uint32(len(l.names))
	l.names = append(l.names, s)
	l.nameIdx[s] = i
	return i
}

// isLowerHex reports whether s is lowercase hex.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// compact is r (thin) as the log holds it.
func (l *Log) compact(r *Record) thinRec {
	t := thinRec{callID: r.CallID, key: r.Key, result: r.Result, response: r.Response, turn: r.Turn,
		tool: l.name(r.Tool), run: l.name(r.Run), holder: l.name(r.Holder), origin: l.name(string(r.Origin)), relation: l.name(string(r.Relation))}
	var x thinExtra
	if len(r.ArgsHash) == 64 && isLowerHex(r.ArgsHash) {
		_, _ = hex.Decode(t.hash[:], []byte(r.ArgsHash))
	} else {
		x.argsHash = r.ArgsHash
	}
	x.err, x.servedFrom, x.resultIn, x.nearMiss = r.Error, r.ServedFrom, r.ResultIn, r.NearMiss
	if x != (thinExtra{}) {
		t.extra = &x
	}
	return t
}

// thinRecord builds thin record i as a Record.
func (l *Log) thinRecord(i int) *Record {
	t := &l.thinRecs[i]
	r := &Record{Seq: i, Tool: l.names[t.tool], Response: t.response, Run: l.names[t.run], Turn: t.turn, CallID: t.callID,
		Origin: Origin(l.names[t.origin]), Result: t.result, Relation: Relation(l.names[t.relation]), Key: t.key,
		Holder: l.names[t.holder], next: -1, prev: -1}
	if x := t.extra; x != nil {
		r.Error, r.ServedFrom, r.ResultIn, r.NearMiss, r.ArgsHash = x.err, x.servedFrom, x.resultIn, x.nearMiss, x.argsHash
	}
	if r.ArgsHash == "" {
		r.ArgsHash = hex.EncodeToString(t.hash[:])
	}
	return r
}

// rec returns record i: the log's own for a full record, one built for a
// thin one.
func (l *Log) rec(i int) *Record {
	if i < len(l.thinRecs) {
		return l.thinRecord(i)
	}
	return l.recs[i]
}

// thinHashed reports whether thin record i is indexed by its hash.
func (t *thinRec) hashed() bool { return t.extra == nil || t.extra.argsHash == "" }

// findThin returns the earliest thin record of tool whose ArgsHash is
// hash (lowercase hex), or -1.
func (l *Log) findThin(tool, hash string) int {
	if len(l.thinRecs) == 0 || len(hash) != 64 {
		return -1
	}
	var h [32]byte
	if _, err := hex.Decode(h[:], []byte(hash)); err != nil {
		return -1
	}
	if l.thinIdxOf != len(l.thinRecs) {
		l.indexThin()
	}
	// The index is sorted by hash, tool, then seq: the first at or after
	// (h, tool) is the earliest match, if it matches.
	k := sort.Search(len(l.thinIdx), func(j int) bool {
		t := &l.thinRecs[l.thinIdx[j]]
		if c := bytes.Compare(t.hash[:], h[:]); c != 0 {
			return c > 0
		}
		return l.names[t.tool] >= tool
	})
	if k == len(l.thinIdx) {
		return -1
	}
	i := int(l.thinIdx[k])
	if t := &l.thinRecs[i]; t.hash != h || l.names[t.tool] != tool {
		return -1
	}
	return i
}

// indexThin sorts the thin records that match by hash: by hash, tool and
// seq.
func (l *Log) indexThin() {
	idx := make([]int32, 0, len(l.thinRecs))
	for i := range l.thinRecs {
		if l.thinRecs[i].hashed() {
			idx = append(idx, int32(i))
		}
	}
	slices.SortFunc(idx, func(a, b int32) int {
		ta, tb := &l.thinRecs[a], &l.thinRecs[b]
		if c := bytes.Compare(ta.hash[:], tb.hash[:]); c != 0 {
			return c
		}
		if na, nb := l.names[ta.tool], l.names[tb.tool]; na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	l.thinIdx, l.thinIdxOf = idx, len(l.thinRecs)
}
