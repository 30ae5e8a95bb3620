package dedup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThinRecordsCompact: a log keeps thin records compactly (thin.go);
// what it gives back (At, Records, snapshots) is every field as restored,
// and matching by hash finds the earliest thin record of the tool.
func TestThinRecordsCompact(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	hash := func(k int) string {
		s := sha256.Sum256([]byte(fmt.Sprint(k)))
		return hex.EncodeToString(s[:])
	}
	var recs []Record
	tools := []string{"a", "b", "refund"}
	for i := range 300 {
		r := Record{Seq: i, Tool: tools[rng.Intn(3)], Response: i + 1, Run: fmt.Sprintf("run-%d", i/100), Turn: i%100 + 1,
			CallID: fmt.Sprintf("c%d", i), Origin: Executed, Key: fmt.Sprintf("tulip-%040d", i), ArgsHash: hash(rng.Intn(50))}
		switch rng.Intn(7) {
		case 0:
			r.Error = &ToolError{Type: "t", Message: fmt.Sprint("m", i)}
		case 1:
			from := rng.Intn(i + 1)
			r.Origin, r.ServedFrom, r.Relation = Cached, &from, EarlierTurn
		case 2:
			in := i * 2
			r.ResultIn = &in
		case 3:
			r.NearMiss = &NearMiss{Record: 1, CallID: "c1", Reason: ReasonArguments}
		case 4:
			r.ArgsHash = "ABCDEF" + hash(i)[6:] // not lowercase: never matches
		case 5:
			r.Unknown = &Unknown{Cause: "lost", Checks: 1, Resolution: "applied"}
		}
		if r.ResultIn == nil && r.Error == nil {
			r.Result = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		}
		if rng.Intn(2) == 0 {
			r.Holder = "holder-1"
		}
		switch i {
		case 5:
			r.Turn = 1 << 40
		case 7:
			r.Result = json.RawMessage{}
		}
		recs = append(recs, r)
	}
	l, err := FromRecords(400, recs)
	require.NoError(t, err)
	for i := range recs {
		recs[i].next, recs[i].prev = -1, -1 // as a thin record always had
	}
	require.Equal(t, recs, l.Records())
	for i := range recs {
		assert.Equal(t, recs[i], *l.At(i))
		assert.True(t, l.At(i).Thin())
	}
	want, err := encodeSnapshot(400, recs)
	require.NoError(t, err)
	got, err := l.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))

	for _, tool := range append(tools, "c") {
		for k := range 60 {
			h := hash(k)
			wantSeq := -1
			for i := range recs {
				if recs[i].Tool == tool && recs[i].ArgsHash == h {
					wantSeq = i
					break
				}
			}
			assert.Equal(t, wantSeq, l.findThin(tool, h), "%s %d", tool, k)
		}
	}

	// A full record after them; the index follows.
	a := mustParse(t, `{"x": 1}`)
	l.Append(Record{Tool: "a", Response: 401, Origin: Executed}, a)
	require.Equal(t, 301, l.Len())
	assert.False(t, l.At(300).Thin())
	assert.Equal(t, 301, l.Settled())
}

// TestThinRecordFallback: a thin record the log cannot number (its table
// of names full) is kept whole, and still matches by hash.
func TestThinRecordFallback(t *testing.T) {
	l := NewLog()
	for i := range 1 << 16 {
		l.name(fmt.Sprint("n", i))
	}
	a := mustParse(t, `{"x": 1}`)
	r := Record{Tool: "new-tool", Response: 1, Run: "r", Turn: 1, CallID: "c1", Origin: Executed, Key: "k",
		ArgsHash: a.ArgsHash(), Result: json.RawMessage(`{}`)}
	require.NoError(t, l.appendThin(r))
	l.responses = 1
	r.next, r.prev = -1, -1
	assert.Equal(t, r, *l.At(0))
	rec, rel := l.FindMatchingExecution("new-tool", a, 2)
	require.NotNil(t, rec)
	assert.Equal(t, EarlierTurn, rel)
	assert.Equal(t, r, *rec)
}
