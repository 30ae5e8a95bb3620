package serve

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// Response ids and client-tool call ids are opaque to clients and
// authenticated: a MAC (HMAC-SHA256, 128 bits) under the server's id key
// over the id's purpose, the tenant that owns it and its content. A forged
// or altered id, or another tenant's, does not decode: a 404.

// idKeyer makes and reads ids under one key.
type idKeyer struct{ key []byte }

// threadName is a thread as the API names it: a thread the Responses API
// made (16 random bytes) or a chat thread (the X-Tulip-Thread name). Its
// workflow ID adds the owning tenant.
type threadName struct {
	Chat bool
	Name string // chat: the header's name; else the random bytes
}

func newResponsesThread() threadName {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return threadName{Name: string(b)}
}

// workflowID is the thread's workflow ID under tenant.
func (t threadName) workflowID(tenant string) string {
	if t.Chat {
		return "tulip-chat/" + tenant + "/" + t.Name
	}
	return "tulip-serve/" + tenant + "/" + hex.EncodeToString([]byte(t.Name))
}

// respID names a response: its thread, its run, the stream offset it
// starts at (non-zero for a response that continued an interrupted run)
// and the run's token counts at that point (what the response's usage
// leaves out). As a call id (callID), it also names a client tool call.
type respID struct {
	Thread threadName
	Run    string
	From   int64
	// Lines counts the run's trace lines before this response (its
	// output lists the later ones).
	Lines   int64
	BaseIn  int64 // the run's input tokens before this response
	BaseOut int64 // the run's output tokens before this response
	// BaseCached is the run's cached input tokens before this response
	// (ids made before it was added have none: 0).
	BaseCached int64
	Call       string // a call id's model call id
}

// Purposes of an id (a call id cannot pass for a response id).
const (
	idResponse = "resp_"
	idCall     = "call_"
	// idMessage names an answer's message item: a client that resends it
	// (or an item_reference to it) names the thread it continues.
	idMessage = "msg_"
	// idApproval names an approval request (an interrupt of a run): its
	// answer reaches the run without previous_response_id.
	idApproval = "mcpr_"
)

const idVersion = 1

const (
	flagChat = 1 << iota
	flagRunUUID
	flagCached // BaseCached follows BaseOut
)

func (k idKeyer) encode(purpose, tenant string, id respID) string {
	b := []byte{idVersion, 0}
	run, uuid := uuidBytes(id.Run)
	if id.Thread.Chat {
		b[1] |= flagChat
	}
	if uuid {
		b[1] |= flagRunUUID
	}
	b = binary.AppendUvarint(b, uint64(id.From))
	b = binary.AppendUvarint(b, uint64(id.Lines))
	b = binary.AppendUvarint(b, uint64(id.BaseIn))
	b = binary.AppendUvarint(b, uint64(id.BaseOut))
	if id.BaseCached > 0 {
		b[1] |= flagCached
		b = binary.AppendUvarint(b, uint64(id.BaseCached))
	}
	if uuid {
		b = append(b, run...)
	} else {
		b = appendString(b, id.Run)
	}
	b = appendString(b, id.Thread.Name)
	if purpose != idResponse {
		b = appendString(b, id.Call)
	}
	b = append(b, k.mac(purpose, tenant, b)...)
	return purpose + base64.RawURLEncoding.EncodeToString(b)
}

func (k idKeyer) decode(purpose, tenant, s string) (respID, bool) {
	rest, ok := strings.CutPrefix(s, purpose)
	if !ok || len(rest) > 2048 {
		return respID{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) < 2+16 {
		return respID{}, false
	}
	body, sum := b[:len(b)-16], b[len(b)-16:]
	if !hmac.Equal(sum, k.mac(purpose, tenant, body)) || body[0] != idVersion {
		return respID{}, false
	}
	var id respID
	flags := body[1]
	r := body[2:]
	var vals [4]uint64
	for i := range vals {
		v, n := binary.Uvarint(r)
		if n <= 0 || v > 1<<62 {
			return respID{}, false
		}
		vals[i], r = v, r[n:]
	}
	id.From, id.Lines, id.BaseIn, id.BaseOut = int64(vals[0]), int64(vals[1]), int64(vals[2]), int64(vals[3])
	if flags&flagCached != 0 {
		v, n := binary.Uvarint(r)
		if n <= 0 || v > 1<<62 {
			return respID{}, false
		}
		id.BaseCached, r = int64(v), r[n:]
	}
	if flags&flagRunUUID != 0 {
		if len(r) < 16 {
			return respID{}, false
		}
		id.Run, r = uuidString(r[:16]), r[16:]
	} else if id.Run, r, ok = readString(r); !ok {
		return respID{}, false
	}
	id.Thread.Chat = flags&flagChat != 0
	if id.Thread.Name, r, ok = readString(r); !ok {
		return respID{}, false
	}
	if purpose != idResponse {
		if id.Call, r, ok = readString(r); !ok {
			return respID{}, false
		}
	}
	if len(r) != 0 || id.Run == "" || id.Thread.Name == "" {
		return respID{}, false
	}
	return id, true
}

func (k idKeyer) mac(purpose, tenant string, body []byte) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(tenant))
	m.Write([]byte{0})
	m.Write(body)
	return m.Sum(nil)[:16]
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// uuidBytes reads a canonical lower-case UUID (a Temporal run id).
func uuidBytes(s string) ([]byte, bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return nil, false
	}
	b, err := hex.DecodeString(s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:])
	if err != nil || uuidString(b) != s {
		return nil, false
	}
	return b, true
}

func uuidString(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
