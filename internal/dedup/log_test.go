package dedup

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func exec(l *Log, resp int, tool, args, result string) *Record {
	a, _ := Parse(args, Limits{})
	return l.Append(Record{Tool: tool, Response: resp, Origin: Executed, Result: json.RawMessage(result)}, a)
}

// TestFindMatchingExecution walks the match steps of docs/rules.md (step 5).
func TestFindMatchingExecution(t *testing.T) {
	type step struct {
		rule     string
		newResp  bool
		tool     string
		args     string
		wantSeq  int // -1: no match
		wantRel  Relation
		executed string // when no match: record it as executed with this result
	}
	steps := []step{
		{"first call: nothing to match", true, "issue_refund", `{"order_id": "o", "amount": 120}`, -1, NoMatch, `{"r":1}`},
		{"same response, 120.0 differs from 120 (sorted-key JSON)", false, "issue_refund", `{"order_id": "o", "amount": 120.0}`, -1, NoMatch, `{"r":2}`},
		{"same response, key order irrelevant", false, "issue_refund", `{"amount": 120, "order_id": "o"}`, 0, SameResponse, ""},
		{"earlier turn, value equality: earliest record serves", true, "issue_refund", `{"order_id": "o", "amount": 120.0}`, 0, EarlierTurn, ""},
		{"other tool, same args: no match", false, "page_oncall", `{"order_id": "o", "amount": 120}`, -1, NoMatch, `{"p":1}`},
		{"earlier turn beats same response", true, "page_oncall", `{"order_id": "o", "amount": 120}`, 4, EarlierTurn, ""},
		{"different args: no match", false, "issue_refund", `{"order_id": "o2", "amount": 120}`, -1, NoMatch, `{"r":3}`},
		{"same response twin of the new record", false, "issue_refund", `{"amount":120,"order_id":"o2"}`, 6, SameResponse, ""},
	}
	l := NewLog()
	for _, s := range steps {
		if s.newResp {
			l.BeginResponse()
		}
		a := mustParse(t, s.args)
		rec, rel := l.FindMatchingExecution(s.tool, a, l.Response())
		if s.wantSeq < 0 {
			assert.Nil(t, rec, s.rule)
			exec(l, l.Response(), s.tool, s.args, s.executed)
			continue
		}
		require.NotNil(t, rec, s.rule)
		assert.Equal(t, s.wantSeq, rec.Seq, s.rule)
		assert.Equal(t, s.wantRel, rel, s.rule)
		from := rec.Seq
		l.Append(Record{Tool: s.tool, Response: l.Response(), Origin: Cached, Result: rec.Result, ServedFrom: &from, Relation: rel}, a)
	}
}

func TestCancelledRecordMatches(t *testing.T) {
	l := NewLog()
	resp := l.BeginResponse()
	a := mustParse(t, `{"case_id": "case-9", "summary": "db down"}`)
	l.Append(Record{Tool: "page_oncall", Response: resp, Origin: Cancelled,
		Error: &ToolError{Type: ErrorTypeCancelled, Message: "paging is disabled"}}, a)
	rec, rel := l.FindMatchingExecution("page_oncall", mustParse(t, `{"summary":"db down","case_id":"case-9"}`), l.BeginResponse())
	require.NotNil(t, rec)
	assert.Equal(t, EarlierTurn, rel)
	assert.Equal(t, "paging is disabled", rec.Error.Message)
}

func TestSnapshotRoundTrip(t *testing.T) {
	l := NewLog()
	r := l.BeginResponse()
	exec(l, r, "issue_refund", `{"order_id": "ord-4821", "amount": 120.0, "n": 9007199254740993, "s": "\ud800é<&>"}`, `{"refund_id":"rf-1","note":"<&>"}`)
	a := mustParse(t, `{"card": "4242"}`)
	l.Append(Record{Tool: "charge_card", Response: r, Turn: 1, CallID: "c2", Run: "run-1", Origin: Executed,
		Error: &ToolError{Type: "Declined", Message: "card declined"}, Key: "k"}, a)
	snap, err := l.Snapshot()
	require.NoError(t, err)
	back, err := Restore(snap)
	require.NoError(t, err)
	snap2, err := back.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(snap), string(snap2))
	assert.Equal(t, l.Response(), back.Response())
	rec, rel := back.FindMatchingExecution("issue_refund", mustParse(t, `{"amount": 120, "order_id": "ord-4821", "n": 9007199254740993, "s": "\ud800é<&>"}`), back.BeginResponse())
	require.NotNil(t, rec, "the index is rebuilt")
	assert.Equal(t, EarlierTurn, rel)
	assert.JSONEq(t, `{"refund_id":"rf-1","note":"<&>"}`, string(rec.Result))
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	for _, s := range []string{
		``, `{}`, `{"version": 3, "records": []}`,
		`{"version": 2, "responses": 1, "records": [{"seq": 0, "tool": "t", "args_hash": "ab", "holder": "r1", "response": 1}]}`,
		`{"version": 2, "responses": 1, "records": [{"seq": 0, "tool": "t", "args_hash": "` + hash64 + `", "response": 1}]}`,
		`{"version": 2, "responses": 1, "records": [{"seq": 0, "tool": "t", "arguments": "{}", "response": 1}, {"seq": 1, "tool": "t", "args_hash": "` + hash64 + `", "holder": "r1", "response": 1}]}`,
		`{"version": 1, "responses": 1, "records": [{"seq": 3, "tool": "t", "arguments": "{}", "response": 1}]}`,
		`{"version": 1, "responses": 1, "records": [{"seq": 0, "tool": "t", "arguments": "[1]", "response": 1}]}`,
		`{"version": 1, "responses": 0, "records": [{"seq": 0, "tool": "t", "arguments": "{}", "response": 1}]}`,
		`{"version": 1, "responses": 0, "records": [], "extra": 1}`,
	} {
		_, err := Restore([]byte(s))
		assert.ErrorIs(t, err, ErrSnapshot, s)
	}
}

func TestSnapshotRefusesInvalidUTF8(t *testing.T) {
	l := NewLog()
	l.Append(Record{Tool: "t", Response: l.BeginResponse(), Origin: Executed,
		Error: &ToolError{Type: "x", Message: "\xff"}}, mustParse(t, `{}`))
	_, err := l.Snapshot()
	assert.Error(t, err, "not silently replaced by U+FFFD")
}

var hash64 = strings.Repeat("ab", 32)

// TestThinRecords: a log inherited by reference holds thin records (content
// held by another run) that match by ArgsHash, exactly as value equality.
func TestThinRecords(t *testing.T) {
	full := NewLog()
	r := full.BeginResponse()
	exec(full, r, "issue_refund", `{"order_id": "o", "amount": 120}`, `{"refund_id":"rf-1"}`)
	exec(full, r, "issue_refund", `{"order_id": "o", "amount": 5}`, `{"refund_id":"rf-2"}`)
	var thin []Record
	for _, rec := range full.Records() {
		rec.ArgsHash, rec.Arguments, rec.Holder = full.At(rec.Seq).Args().ArgsHash(), "", "run-1"
		thin = append(thin, rec)
	}
	l, err := FromRecords(full.Response(), thin)
	require.NoError(t, err)
	require.True(t, l.At(0).Thin())

	resp := l.BeginResponse()
	rec, rel := l.FindMatchingExecution("issue_refund", mustParse(t, `{"amount": 120.0, "order_id": "o"}`), resp)
	require.NotNil(t, rec, "120.0 matches 120 across turns, by hash")
	assert.Equal(t, 0, rec.Seq)
	assert.Equal(t, EarlierTurn, rel)
	rec, _ = l.FindMatchingExecution("page_oncall", mustParse(t, `{"amount": 120, "order_id": "o"}`), resp)
	assert.Nil(t, rec, "another tool's hash")
	rec, _ = l.FindMatchingExecution("issue_refund", mustParse(t, `{"order_id": "o", "amount": 121}`), resp)
	assert.Nil(t, rec)

	// A full record appended after them matches as usual, and a thin match
	// (earlier) wins over it.
	exec(l, resp, "issue_refund", `{"order_id": "o", "amount": 120}`, `{"refund_id":"rf-3"}`)
	resp = l.BeginResponse()
	rec, _ = l.FindMatchingExecution("issue_refund", mustParse(t, `{"order_id": "o", "amount": 120}`), resp)
	assert.Equal(t, 0, rec.Seq, "the earliest record serves")

	b, err := l.Snapshot()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"version":2`)
	back, err := Restore(b)
	require.NoError(t, err)
	b2, err := back.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, string(b), string(b2))
	assert.True(t, back.At(1).Thin())
	assert.False(t, back.At(2).Thin())
}

// A record written when a served record's origin was spelled "served"
// reads as Cached, the trace's word: one word for it everywhere.
func TestRestoreReadsServedAsCached(t *testing.T) {
	snap := `{"version":1,"responses":2,"records":[
		{"seq":0,"tool":"t","arguments":"{\"a\":1}","response":1,"turn":1,"call_id":"c1","origin":"executed","result":{"ok":true}},
		{"seq":1,"tool":"t","arguments":"{\"a\":1}","response":2,"turn":2,"call_id":"c2","origin":"served","result":{"ok":true},"served_from":0,"relation":"earlier_turn"}]}`
	l, err := Restore([]byte(snap))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Records()[1].Origin; got != Cached {
		t.Fatalf("origin %q, want %q", got, Cached)
	}
	out, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"origin":"cached"`) || strings.Contains(string(out), `"served"`) {
		t.Fatalf("snapshot written again: %s", out)
	}
}
