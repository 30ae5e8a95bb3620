package storetest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/storetest"
)

// A store's test opens it over a place of the test's own, and says how to
// break an entry and how to count those moved aside.
func Example() {
	dir := filepath.Join(os.TempDir(), "example-threads")
	h := storetest.Harness{
		Open: func(_ testing.TB, c converter.PayloadCodec) tulip.ThreadStore {
			return tulip.DirStore{Dir: dir, Codec: c}
		},
		Corrupt: func(_ testing.TB, thread string, b []byte) {
			_ = os.WriteFile(tulip.DirStore{Dir: dir}.Path(thread), b, 0o600)
		},
		Aside: func(_ testing.TB, thread string) int {
			m, _ := filepath.Glob(tulip.DirStore{Dir: dir}.Path(thread) + ".bad-*")
			return len(m)
		},
	}
	// In a test: storetest.Run(t, h)
	fmt.Println(h.Open != nil && h.Corrupt != nil && h.Aside != nil)
	// Output: true
}
