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

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
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
		spec := activities.ToolSpec{Name: text(), Idempotent: rng.IntN(2) == 0}
		require.Equal(t, keyReference(r, spec, args), r.key(spec, args))
	}
	r := &run{namespace: "default", scope: "thread:t-1", in: RunInput{Agent: "support"}}
	args, err := dedup.Parse(`{"order_id": "ord-1", "amount": 120.0}`, dedup.Limits{})
	require.NoError(t, err)
	require.Equal(t, "tulip-a0897f92a97ff9e5c168f017c3818f09a832b003", r.key(activities.ToolSpec{Name: "issue_refund", Idempotent: true}, args))
}

func keyReference(r *run, spec activities.ToolSpec, args *dedup.Args) string {
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
