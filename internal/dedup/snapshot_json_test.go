package dedup

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A snapshot is written as an encoding/json Encoder with HTML escaping off
// writes it (what snapshots were before), on random records with every
// optional member, escapes and whitespace in raw values.
func TestSnapshotJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	texts := []string{"", "a", "issue_refund", "<b>&", "\u2028", "\"\\\n\t", "é", "\x01", "tulip-0123456789"}
	text := func() string { return texts[rng.IntN(len(texts))] + texts[rng.IntN(len(texts))] }
	raws := []string{"", "0", "{}", `"<a&b> "`, "\"\u2029\"", `{"a": 1,  "b" : [1, 2]}`, "\n[ ]\n", `{"refund_id":"rf-1"}`, "null"}
	raw := func() json.RawMessage {
		if s := raws[rng.IntN(len(raws))]; s != "" {
			return json.RawMessage(s)
		}
		if rng.IntN(2) == 0 {
			return json.RawMessage{} // empty, not nil: as thin records keep a result
		}
		return nil
	}
	num := func() *int {
		if rng.IntN(3) > 0 {
			return nil
		}
		n := rng.IntN(500)
		return &n
	}
	for i := range 3000 {
		s := snapshot{Version: rng.IntN(4), Responses: rng.IntN(100)}
		if rng.IntN(5) > 0 {
			s.Records = []Record{}
		}
		for range rng.IntN(4) {
			r := Record{Seq: rng.IntN(1000), Tool: text(), Arguments: text(), Response: rng.IntN(9), Run: text(), Turn: rng.IntN(9),
				CallID: text(), Origin: Origin(text()), Result: raw(), ServedFrom: num(), Relation: Relation(text()), Key: text(),
				ArgsHash: text(), Holder: text(), ResultIn: num()}
			if rng.IntN(3) == 0 {
				r.Error = &ToolError{Type: text(), Message: text()}
			}
			if rng.IntN(3) == 0 {
				r.NearMiss = &NearMiss{Record: rng.IntN(9), CallID: text(), Reason: NearMissReason(text()), Distance: rng.IntN(3)}
				if rng.IntN(3) == 0 {
					r.NearMiss.Differences = []Difference{} // empty, not nil
				}
				for range rng.IntN(3) {
					r.NearMiss.Differences = append(r.NearMiss.Differences, Difference{Path: text(), Was: raw(), Now: raw()})
				}
			}
			if rng.IntN(3) == 0 {
				r.Unknown = &Unknown{Cause: text(), Checks: rng.IntN(3), Retries: rng.IntN(2), Holds: rng.IntN(2), Resolution: text()}
			}
			s.Records = append(s.Records, r)
		}
		var sb strings.Builder
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		require.Equal(t, strings.TrimSuffix(sb.String(), "\n"), string(appendSnapshot(nil, &s)), "snapshot %d", i)
	}
}
