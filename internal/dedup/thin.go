package dedup

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"sort"
)

// Thin records (Record.Thin) come first in a log and never change: a log
// keeps them compactly, not as Records. A thin record's argument hash is
// kept as its 32 bytes, its names (tool, run, holder, origin, relation) as
// numbers into the log's table of names, its texts (call id, key, result)
// one after another in one string, and what it rarely has (an error, a
// served-from or result-in, a near miss) behind one pointer. At and
// Records give a Record built from it, with the same fields (and JSON) as
// the record it was restored from.

// thinRec is a thin record as the log holds it.
type thinRec struct {
	hash [32]byte // ArgsHash decoded (see thinExtra.argsHash)
	// The call id, key and result are the log's text from at on, of
	// these lengths.
	at                        uint32
	callLen, keyLen, resLen   uint32
	response, turn            int32  // see thinExtra.big
	tool, run, holder, origin uint16 // names
	relation                  uint16
	extra                     *thinExtra
}

// thinExtra is what few thin records have.
type thinExtra struct {
	err        *ToolError
	servedFrom *int
	resultIn   *int
	nearMiss   *NearMiss
	unknown    *Unknown
	// argsHash is ArgsHash when it is not 64 lowercase hex digits (such a
	// record never matches a call: ArgsHash is lowercase hex).
	argsHash string
	// big: the response and turn are these (too large for thinRec's).
	big            bool
	response, turn int
	// resultEmpty: a result of no bytes that is not nil (kept as it was).
	resultEmpty bool
	// full is the record itself, when it could not be made compact (see
	// compact); hash is still set.
	full *Record
}

// name returns the number of s in the log's table of names, and false
// when the table is full.
func (l *Log) name(s string) (uint16, bool) {
	if i, ok := l.nameIdx[s]; ok {
		return i, true
	}
	if len(l.names) > math.MaxUint16 {
		return 0, false
	}
	if l.nameIdx == nil {
		l.nameIdx = map[string]uint16{}
	}
	i := uint16(len(l.names))
	l.names = append(l.names, s)
	l.nameIdx[s] = i
	return i, true
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

// compact is r (thin) as the log holds it, or false when it cannot hold
// it so (more names than it numbers, texts past 4 GiB): then it keeps r.
func (l *Log) compact(r *Record) (thinRec, bool) {
	var t thinRec
	var ok [5]bool
	t.tool, ok[0] = l.name(r.Tool)
	t.run, ok[1] = l.name(r.Run)
	t.holder, ok[2] = l.name(r.Holder)
	t.origin, ok[3] = l.name(string(r.Origin))
	t.relation, ok[4] = l.name(string(r.Relation))
	var x thinExtra
	if len(r.ArgsHash) == 64 && isLowerHex(r.ArgsHash) {
		_, _ = hex.Decode(t.hash[:], []byte(r.ArgsHash))
	} else {
		x.argsHash = r.ArgsHash
	}
	if ok != [5]bool{true, true, true, true, true} || l.text.Len()+len(r.CallID)+len(r.Key)+len(r.Result) > math.MaxUint32 {
		full := *r
		x.full = &full
		t.extra = &x
		return t, false
	}
	t.at, t.callLen, t.keyLen, t.resLen = uint32(l.text.Len()), uint32(len(r.CallID)), uint32(len(r.Key)), uint32(len(r.Result))
	l.text.WriteString(r.CallID)
	l.text.WriteString(r.Key)
	l.text.Write(r.Result)
	if int(int32(r.Response)) == r.Response && int(int32(r.Turn)) == r.Turn {
		t.response, t.turn = int32(r.Response), int32(r.Turn)
	} else {
		x.big, x.response, x.turn = true, r.Response, r.Turn
	}
	x.resultEmpty = r.Result != nil && len(r.Result) == 0
	x.err, x.servedFrom, x.resultIn, x.nearMiss, x.unknown = r.Error, r.ServedFrom, r.ResultIn, r.NearMiss, r.Unknown
	if x != (thinExtra{}) {
		t.extra = &x
	}
	return t, true
}

// thinRecord builds thin record i as a Record.
func (l *Log) thinRecord(i int) *Record {
	t := &l.thinRecs[i]
	if t.extra != nil && t.extra.full != nil {
		r := *t.extra.full
		r.Seq, r.args, r.pending, r.vh, r.next, r.prev = i, nil, false, 0, -1, -1
		return &r
	}
	text := l.text.String()
	key, res := t.at+t.callLen, t.at+t.callLen+t.keyLen
	r := &Record{Seq: i, Tool: l.names[t.tool], Response: int(t.response), Run: l.names[t.run], Turn: int(t.turn),
		CallID: text[t.at:key], Origin: Origin(l.names[t.origin]), Relation: Relation(l.names[t.relation]), Key: text[key:res],
		Holder: l.names[t.holder], next: -1, prev: -1}
	if t.resLen > 0 {
		r.Result = json.RawMessage(text[res : res+t.resLen])
	}
	if x := t.extra; x != nil {
		r.Error, r.ServedFrom, r.ResultIn, r.NearMiss, r.Unknown, r.ArgsHash = x.err, x.servedFrom, x.resultIn, x.nearMiss, x.unknown, x.argsHash
		if x.big {
			r.Response, r.Turn = x.response, x.turn
		}
		if x.resultEmpty {
			r.Result = json.RawMessage{}
		}
	}
	if r.ArgsHash == "" {
		r.ArgsHash = hex.EncodeToString(t.hash[:])
	}
	return r
}

// toolOf is thin record t's tool.
func (l *Log) toolOf(t *thinRec) string {
	if t.extra != nil && t.extra.full != nil {
		return t.extra.full.Tool
	}
	return l.names[t.tool]
}

// responseOf is thin record t's response.
func (t *thinRec) responseOf() int {
	switch {
	case t.extra == nil:
		return int(t.response)
	case t.extra.full != nil:
		return t.extra.full.Response
	case t.extra.big:
		return t.extra.response
	}
	return int(t.response)
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
		return l.toolOf(t) >= tool
	})
	if k == len(l.thinIdx) {
		return -1
	}
	i := int(l.thinIdx[k])
	if t := &l.thinRecs[i]; t.hash != h || l.toolOf(t) != tool {
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
		if na, nb := l.toolOf(ta), l.toolOf(tb); na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	l.thinIdx, l.thinIdxOf = idx, len(l.thinRecs)
}
