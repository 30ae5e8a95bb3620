package tests

import (
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/storetest"
)

// Every thread store passes the conformance suite (package storetest):
// newest wins whatever the order and the races, a bad entry is an
// EntryError and is moved aside by the next save.
func TestThreadStoreConformance(t *testing.T) {
	for _, st := range threadStores {
		t.Run(st.name, func(t *testing.T) {
			opened := map[string]storeUnder{}
			under := func(t testing.TB) storeUnder {
				u, ok := opened[t.Name()]
				if !ok {
					u = st.open(t.(*testing.T), nil)
					opened[t.Name()] = u
				}
				return u
			}
			storetest.Run(t, storetest.Harness{
				Open: func(t testing.TB, c converter.PayloadCodec) tulip.ThreadStore {
					u := under(t)
					return u.withCodec(c)
				},
				Corrupt: func(t testing.TB, thread string, b []byte) { under(t).write(t.(*testing.T), thread, b) },
				Aside:   func(t testing.TB, thread string) int { return under(t).aside(t.(*testing.T), thread) },
			})
		})
	}
}
