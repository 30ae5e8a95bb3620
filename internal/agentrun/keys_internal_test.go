package agentrun

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// A call's downstream key is a promise to the service it calls: the same
// call keeps the same key across versions. Held to the key as it was
// first written (keyReference), on random parts, and to one key pinned.
func TestKeyIsStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	texts := []string{"", "default", "support", "thread:t-1", "run:wf-1", "issue_refund", "é", strings.Repeat("x", 300)}
	text := func() string { return texts[rng.IntN(len(texts))] + texts[rng.IntN(len(texts))] }
	for range 5000 {
		r := &run{namespace: text(), scope: text(), in: RunInput{Agent: text()}}
		r.baseLen, r.executions = rng.IntN(50), rng.IntN(50)
		args, err := dedup.Parse(fmt.Sprintf(`{"order_id": %q, "amount": %d.0}`, text(), rng.IntN(500)), dedup.Limits{})
		require.NoError(t, err)
		spec := protocol.ToolSpec{Name: text(), Idempotent: rng.IntN(2) == 0}
		require.Equal(t, keyReference(r, spec, args), r.key(spec, args))
	}
	r := &run{namespace: "default", scope: "thread:t-1", in: RunInput{Agent: "support"}}
	args, err := dedup.Parse(`{"order_id": "ord-1", "amount": 120.0}`, dedup.Limits{})
	require.NoError(t, err)
	require.Equal(t, "tulip-a0897f92a97ff9e5c168f017c3818f09a832b003", r.key(protocol.ToolSpec{Name: "issue_refund", Idempotent: true}, args))
}

func keyReference(r *run, spec protocol.ToolSpec, args *dedup.Args) string {
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

// A template's key is a promise too: held to the expansion as it was
// first written (expandKeyReference) on random arguments, numbers spelled
// every way, and to one key pinned.
func TestTemplateKeyIsStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	values := []string{`"ord-1"`, `"é{}"`, `""`, `120`, `120.0`, `1.2e2`, `0.5`, `-0.0`, `-7`, `1e300`, `12345678901234567890`,
		`true`, `null`, `[1, "a"]`, `{"b": 1, "a": [2.0]}`}
	tmpls := []string{"refund:{order_id}:{amount}:v1", "{amount}", "x{missing}y", "{order_id", "}{", "", "{a}{b}{a}"}
	names := []string{"order_id", "amount", "a", "b"}
	for range 5000 {
		var members []string
		for range rng.IntN(4) {
			members = append(members, fmt.Sprintf("%q: %s", names[rng.IntN(len(names))], values[rng.IntN(len(values))]))
		}
		args, err := dedup.Parse("{"+strings.Join(members, ", ")+"}", dedup.Limits{})
		require.NoError(t, err)
		tmpl := tmpls[rng.IntN(len(tmpls))]
		require.Equal(t, expandKeyReference(tmpl, args.Value()), expandKey(tmpl, args.Value()), "%s over %s", tmpl, args.Text())
	}
	args, err := dedup.Parse(`{"order_id": "ord-7", "amount": 120.0}`, dedup.Limits{})
	require.NoError(t, err)
	require.Equal(t, "refund:ord-7:120:v1", expandKey("refund:{order_id}:{amount}:v1", args.Value()))
}

// expandKeyReference is expandKey as first written.
func expandKeyReference(tmpl string, obj *dedup.Value) string {
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
		if v := obj.Get(tmpl[open+1 : open+end]); v != nil {
			switch v.Kind() {
			case dedup.String:
				sb.WriteString(v.Str())
			case dedup.Int, dedup.Float:
				k := dedup.NewArgs(*v).ValueKey()
				sb.WriteString(strings.TrimSuffix(k[1:], ";"))
			default:
				sb.WriteString(dedup.NewArgs(*v).SortedKeyJSON())
			}
		}
		tmpl = tmpl[open+end+1:]
	}
	sb.WriteString(tmpl)
	return sb.String()
}
