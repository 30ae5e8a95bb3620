package threadstate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// appendMessageJSON writes json.Marshal's bytes: every escape encoding/json
// makes (quotes, controls, HTML characters, U+2028/9, invalid UTF-8), every
// member present or left out.
func TestMessageJSON(t *testing.T) {
	pieces := []string{"", "a", "hello world", `"`, `\`, "\b\f\n\r\t", "\x00\x01\x1f", "<script>&</script>", "\u2028\u2029",
		"é", "日本", "😀", "\xff", "\xed\xa0\x80", "\xe2\x80", "{\"order_id\": \"ord-1\", \"amount\": 120.0}", "\x7f"}
	rng := rand.New(rand.NewPCG(3, 4))
	text := func() string {
		s := ""
		for range rng.IntN(5) {
			s += pieces[rng.IntN(len(pieces))]
		}
		return s
	}
	for i := range 20000 {
		m := Message{Role: text(), Content: text(), ToolCallID: text(), Served: rng.IntN(2) == 0}
		switch rng.IntN(3) {
		case 0:
			m.ToolCalls = []ToolCall{}
		case 1:
			for range 1 + rng.IntN(3) {
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: text(), Name: text(), Arguments: text()})
			}
		}
		if rng.IntN(3) == 0 {
			n := rng.IntN(5000) - 10
			m.ContentIn = &n
		}
		want, err := json.Marshal(m)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendMessageJSON(nil, &m)), "message %d", i)
	}
}

// ExtendDigest is SHA-256(d || SHA-256(JSON(msg))) for each message, JSON
// as json.Marshal writes it.
func TestExtendDigestDefinition(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "refund <ord-1> & more"}, {Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "issue_refund", Arguments: `{"order_id": "ord-1"}`}}},
		{Role: "tool", ToolCallID: "c1", Content: `{"refund_id":"rf-1"}`, Served: true}}
	d := "start"
	for _, m := range msgs {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		mh := sha256.Sum256(b)
		sum := sha256.Sum256(append([]byte(d), mh[:]...))
		d = hex.EncodeToString(sum[:])
	}
	require.Equal(t, d, ExtendDigest("start", msgs...))
}
