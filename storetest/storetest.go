// Package storetest is the conformance suite of a tulip.ThreadStore: what
// every thread store must do for threads to outlive their runs (the newer
// state wins, whatever order saves arrive in and however many race; a bad
// entry is an EntryError on load and is moved aside, never deleted, by the
// next save). tulip's own stores run it; run it on yours:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: ..., Corrupt: ..., Aside: ...})
//	}
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Harness opens the store under test and reaches under it.
type Harness struct {
	// Open returns a store with codec c (nil: none) over a place that
	// belongs to the test t: every Open of one test reaches the same
	// entries, and no other test's. Required.
	Open func(t testing.TB, c converter.PayloadCodec) tulip.ThreadStore
	// Corrupt replaces the thread's entry (in the place Open reaches for
	// t) with b, as a torn write or a stray edit would. Required.
	Corrupt func(t testing.TB, threadID string, b []byte)
	// Aside counts the thread's entries that were moved aside. Required.
	Aside func(t testing.TB, threadID string) int
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("missing thread loads nil", func(t *testing.T) {
		s := h.Open(t, nil)
		cp, err := s.Load(ctx(t), ref("t-missing", "r0", 0))
		require.NoError(t, err)
		assert.Nil(t, cp)
	})
	t.Run("saved state loads back", func(t *testing.T) {
		s := h.Open(t, nil)
		want := state("r1", 3)
		require.NoError(t, s.Save(ctx(t), ref("t-round", "r1", 1), want))
		got, err := s.Load(ctx(t), ref("t-round", "r2", 2))
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, want.Messages, got.Messages)
		assert.Equal(t, "r1", got.Run)
	})
	t.Run("a late save of an older run keeps the newer state", func(t *testing.T) {
		s := h.Open(t, nil)
		require.NoError(t, s.Save(ctx(t), ref("t-late", "new", 2), state("new", 5)))
		require.NoError(t, s.Save(ctx(t), ref("t-late", "old", 1), state("old", 3)))
		got, err := s.Load(ctx(t), ref("t-late", "r3", 3))
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, "new", got.Run, "the older run's late save overwrote the newer state")
	})
	t.Run("racing saves keep the newest", func(t *testing.T) {
		// Two store values (two workers) save the states of 40 runs
		// in shuffled order, 8 at a time: the run that started last
		// must win, every round.
		a, b := h.Open(t, nil), h.Open(t, nil)
		for round := range 5 {
			thread := fmt.Sprintf("t-race-%d", round)
			order := rand.Perm(40)
			var wg sync.WaitGroup
			errs := make(chan error, len(order))
			sem := make(chan struct{}, 8)
			for i, n := range order {
				s := a
				if i%2 == 1 {
					s = b
				}
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					run := fmt.Sprintf("run-%02d", n)
					errs <- s.Save(ctx(t), ref(thread, run, n), state(run, n+1))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			got, err := a.Load(ctx(t), ref(thread, "next", 100))
			require.NoError(t, err)
			require.NotNil(t, got)
			assert.Equal(t, "run-39", got.Run, "round %d: an older run's save won", round)
		}
	})
	t.Run("a corrupt entry is an EntryError and the next save moves it aside", func(t *testing.T) {
		s := h.Open(t, nil)
		require.NoError(t, s.Save(ctx(t), ref("t-bad", "r1", 1), state("r1", 2)))
		h.Corrupt(t, "t-bad", []byte("\x00torn"))
		_, err := s.Load(ctx(t), ref("t-bad", "r2", 2))
		var bad *tulip.StoreEntryError
		require.ErrorAs(t, err, &bad)
		assert.Equal(t, "t-bad", bad.Thread)
		assert.NotEmpty(t, bad.Entry)

		require.NoError(t, s.Save(ctx(t), ref("t-bad", "r2", 2), state("r2", 4)), "a save over a bad entry writes the run's state")
		assert.Equal(t, 1, h.Aside(t, "t-bad"), "the bad entry is moved aside, not deleted")
		got, err := s.Load(ctx(t), ref("t-bad", "r3", 3))
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, "r2", got.Run)
	})
	t.Run("an entry encrypted with a missing key is an EntryError naming the key", func(t *testing.T) {
		k1, k2 := keyring(t, "k1"), keyring(t, "k2")
		s1 := h.Open(t, k1)
		require.NoError(t, s1.Save(ctx(t), ref("t-key", "r1", 1), state("r1", 2)))
		got, err := s1.Load(ctx(t), ref("t-key", "r2", 2))
		require.NoError(t, err)
		require.NotNil(t, got, "the key that wrote it reads it")

		s2 := h.Open(t, k2)
		_, err = s2.Load(ctx(t), ref("t-key", "r2", 2))
		var bad *tulip.StoreEntryError
		require.ErrorAs(t, err, &bad)
		var keyErr *codec.KeyError
		assert.ErrorAs(t, err, &keyErr, "the cause names the missing key")

		require.NoError(t, s2.Save(ctx(t), ref("t-key", "r2", 2), state("r2", 3)))
		assert.Equal(t, 1, h.Aside(t, "t-key"))
		got, err = s2.Load(ctx(t), ref("t-key", "r3", 3))
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, "r2", got.Run)
	})
	t.Run("encrypted entries hold no plaintext", func(t *testing.T) {
		s := h.Open(t, keyring(t, "k1"))
		cp := state("r1", 1)
		cp.Messages[0].Content = "secret-refund-ord-4821"
		require.NoError(t, s.Save(ctx(t), ref("t-enc", "r1", 1), cp))
		plain := h.Open(t, nil)
		_, err := plain.Load(ctx(t), ref("t-enc", "r2", 2))
		var bad *tulip.StoreEntryError
		assert.ErrorAs(t, err, &bad, "a store without the key cannot read it")
	})
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ref is run's ThreadRef on thread, started n seconds after an epoch.
func ref(thread, run string, n int) tulip.ThreadRef {
	return tulip.ThreadRef{ThreadID: thread, RunID: run, Started: epoch.Add(time.Duration(n) * time.Second)}
}

// state is a state of run with n messages.
func state(run string, n int) *tulip.ThreadState {
	cp := &threadstate.Checkpoint{Run: run, Agents: map[string]json.RawMessage{}}
	for i := range n {
		cp.Messages = append(cp.Messages, threadstate.Message{Role: "user", Content: fmt.Sprintf("message %d of %s", i, run)})
	}
	return threadstate.PublicState(cp).(*tulip.ThreadState)
}

func keyring(t testing.TB, id string) *codec.Keyring {
	key := make([]byte, 32)
	for i := range key {
		key[i] = id[len(id)-1] + byte(i)
	}
	k, err := codec.NewKeyring(codec.Key{ID: id, Secret: key})
	require.NoError(t, err)
	return k
}
