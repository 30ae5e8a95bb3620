package agentrun

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// key is the execution's downstream idempotency key: the tool's template,
// or a hash of namespace, agent, thread (or run), tool and the canonical
// arguments; a non-idempotent tool's key also counts its executions, so
// each mint is new: the count goes on from baseLen, which is past every
// count the thread's earlier runs used (loadThread), and crosses
// continue-as-new with the executions (Carry).
func (r *run) key(spec protocol.ToolSpec, args *dedup.Args) string {
	if spec.KeyTemplate != "" {
		return expandKey(spec.KeyTemplate, args.Value())
	}
	// SHA-256 of each part as its length, ":" and itself (then "#" and
	// the execution's number for a tool that is not idempotent): the first
	// 20 bytes in hex. Written into buffers on the stack: every call
	// takes a key, on every replay.
	var arr [256]byte
	b := arr[:0]
	for _, part := range [...]string{r.namespace, r.in.Agent, r.scope, spec.Name, args.ValueKey()} {
		b = strconv.AppendInt(b, int64(len(part)), 10)
		b = append(b, ':')
		b = append(b, part...)
	}
	if !spec.Idempotent {
		b = append(b, '#')
		b = strconv.AppendInt(b, int64(r.baseLen+r.executions), 10)
	}
	sum := sha256.Sum256(b)
	var key [len("tulip-") + 40]byte
	copy(key[:], "tulip-")
	hex.Encode(key[len("tulip-"):], sum[:20])
	return string(key[:])
}

// minted is the thread state's Minted as this run hands it on: the loaded
// counts, this agent's moved past every count this run used. recs is the
// number of this agent's records the state holds: an agent whose next run
// would count from past that anyway (the log's length, see loadThread)
// needs no entry, so states stay as they were unless keys would repeat.
func (r *run) minted(recs int) map[string]int {
	var out map[string]int
	if r.loaded != nil {
		out = maps.Clone(r.loaded.Minted)
	}
	n := max(r.baseLen+r.executions, out[r.in.Agent])
	if n <= recs {
		delete(out, r.in.Agent)
	} else {
		if out == nil {
			out = map[string]int{}
		}
		out[r.in.Agent] = n
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// expandKey replaces {name} in tmpl with the top-level argument name.
func expandKey(tmpl string, obj *dedup.Value) string {
	var sb strings.Builder
	sb.Grow(len(tmpl) + 64)
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			break
		}
		sb.WriteString(tmpl[:open])
		name := tmpl[open+1 : open+end]
		if v := obj.Get(name); v != nil {
			sb.WriteString(keyPart(v))
		}
		tmpl = tmpl[open+end+1:]
	}
	sb.WriteString(tmpl)
	return sb.String()
}

func keyPart(v *dedup.Value) string {
	switch v.Kind() {
	case dedup.String:
		return v.Str()
	case dedup.Int, dedup.Float:
		return v.NumberKey() // 120 and 120.0 agree
	default:
		return dedup.NewArgs(*v).SortedKeyJSON()
	}
}
