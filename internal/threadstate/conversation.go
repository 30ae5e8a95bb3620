package threadstate

import (
	"crypto/sha256"
	"encoding/hex"
)

// ExtendDigest returns the digest of a conversation whose prefix has digest
// d, followed by msgs: d' = SHA-256(d || SHA-256(JSON(msg))) for each
// message, in hex. The empty conversation's digest is "".
func ExtendDigest(d string, msgs ...Message) string {
	if len(msgs) == 0 {
		return d
	}
	bp := jsonBufs.Get().(*[]byte)
	defer jsonBufs.Put(bp)
	buf := *bp
	defer func() { *bp = buf[:0] }()
	var sum [sha256.Size]byte
	var link [2*sha256.Size + sha256.Size]byte // a digest in hex, then a message's hash
	prev := append(link[:0:0], d...)           // the digest so far, in hex
	var hexed [2 * sha256.Size]byte
	for i := range msgs {
		buf = appendMessageJSON(buf[:0], &msgs[i]) // json.Marshal's bytes
		mh := sha256.Sum256(buf)
		in := append(append(link[:0], prev...), mh[:]...)
		sum = sha256.Sum256(in)
		hex.Encode(hexed[:], sum[:])
		prev = hexed[:]
	}
	return string(prev)
}

// ConversationRange asks QueryConversation for messages [From, To).
type ConversationRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// ConversationPage is QueryConversation's answer: messages from the range's
// From, at most about ConversationPageBytes of them (at least one), and
// Next, where the next page starts.
type ConversationPage struct {
	Messages []Message `json:"messages"`
	Next     int       `json:"next"`
}

// ConversationPageBytes bounds a conversation page (a query answer must fit
// in a gRPC message).
const ConversationPageBytes = 1 << 20
