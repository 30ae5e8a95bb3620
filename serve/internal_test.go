package serve

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// The per-thread start locks live only while a start holds or waits for
// one: a server that has started runs on many threads holds none.
func TestLockThreadShrinks(t *testing.T) {
	a := &apiServer{threads: map[string]*threadLock{}}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := a.lockThread([]string{"t1", "t2", "t3"}[i%3])
			unlock()
		}()
	}
	wg.Wait()
	assert.Zero(t, a.lockedThreads())
	unlock := a.lockThread("held")
	assert.Equal(t, 1, a.lockedThreads())
	unlock()
	assert.Zero(t, a.lockedThreads())
}

func TestJSONDepth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`{}`, 1},
		{`{"a":[1,{"b":2}]}`, 3},
		{`{"a":"{[{[{["}`, 1},
		{`{"a":"\"{"}`, 1},
		{`[[[[]]]]`, 4},
		{``, 0},
	} {
		assert.Equal(t, c.want, jsonDepth([]byte(c.in)), c.in)
	}
}

// A server on every interface has no origin of its own: a page's origin
// there proves nothing (--insecure on 0.0.0.0 let an evil page in).
func TestSameOriginOnEveryInterface(t *testing.T) {
	assert.False(t, (&apiServer{addr: "0.0.0.0:8787"}).sameOrigin("http://evil.example:8787"))
	assert.False(t, (&apiServer{addr: "[::]:8787"}).sameOrigin("http://10.0.0.5:8787"))
	assert.True(t, (&apiServer{addr: "127.0.0.1:8787"}).sameOrigin("http://127.0.0.1:8787"))
	assert.False(t, (&apiServer{addr: "127.0.0.1:8787"}).sameOrigin("http://evil.example:8787"))
}

// An id of one purpose never passes for another's, nor for another
// tenant's: a message id cannot be a response id.
func TestIDPurposes(t *testing.T) {
	k := idKeyer{key: []byte("0123456789abcdef0123456789abcdef")}
	id := respID{Thread: threadName{Name: "thread-bytes-16b"}, Run: "7f3a1c2e-0000-4000-8000-000000000001", Call: "3"}
	for _, p := range []string{idMessage, idApproval, idCall} {
		s := k.encode(p, "acme", id)
		require.True(t, strings.HasPrefix(s, p))
		got, ok := k.decode(p, "acme", s)
		require.True(t, ok, p)
		assert.Equal(t, id, got)
		_, ok = k.decode(p, "other", s)
		assert.False(t, ok, "another tenant's")
		for _, q := range []string{idResponse, idMessage, idApproval, idCall} {
			if q != p {
				_, ok = k.decode(q, "acme", q+strings.TrimPrefix(s, p))
				assert.False(t, ok, "%s as %s", p, q)
			}
		}
	}
	assert.Len(t, shortID(strings.Repeat("x", 7<<20)), 67)
}

// A continued response's usage counts its own cached tokens only: its id
// carries the run's count before it; ids made before carry none (0).
func TestIDCachedTokens(t *testing.T) {
	k := idKeyer{key: []byte("0123456789abcdef0123456789abcdef")}
	id := respID{Thread: threadName{Name: "t"}, Run: "7f3a1c2e-0000-4000-8000-000000000001", From: 3, Lines: 2, BaseIn: 100, BaseOut: 7, BaseCached: 64}
	got, ok := k.decode(idResponse, "acme", k.encode(idResponse, "acme", id))
	require.True(t, ok)
	assert.Equal(t, id, got)
	id.BaseCached = 0
	got, ok = k.decode(idResponse, "acme", k.encode(idResponse, "acme", id))
	require.True(t, ok)
	assert.Equal(t, id, got, "an id without the count, as made before it")
	assert.Equal(t, tokens{in: 20, out: 3, cached: 16},
		responseTokens(respMeta{id: respID{BaseIn: 100, BaseOut: 7, BaseCached: 64}},
			&agent.Result{Usage: &tulip.Usage{PromptTokens: 120, CompletionTokens: 10, CachedTokens: 80}}))
}
