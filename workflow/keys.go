package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/dedup"
)

// key is the execution's downstream idempotency key: the tool's template,
// or a hash of namespace, agent, thread (or run), tool and the canonical
// arguments; a non-idempotent tool's key also counts its executions, so
// each mint is new.
func (r *run) key(spec activities.ToolSpec, args *dedup.Args) string {
	if spec.KeyTemplate != "" {
		return expandKey(spec.KeyTemplate, args.Value())
	}
	h := sha256.New()
	for _, part := range []string{r.namespace, r.in.Agent, r.scope, spec.Name, args.ValueKey()} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	if !spec.Idempotent {
		fmt.Fprintf(h, "#%d", r.baseLen+r.executions)
	}
	return "tulip-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// expandKey replaces {name} in tmpl with the top-level argument name.
func expandKey(tmpl string, obj *dedup.Value) string {
	var sb strings.Builder
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
		k := dedup.NewArgs(*v).ValueKey() // "i120;" or "d0.5;": 120 and 120.0 agree
		return strings.TrimSuffix(k[1:], ";")
	default:
		return dedup.NewArgs(*v).SortedKeyJSON()
	}
}
