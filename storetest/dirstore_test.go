package storetest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/storetest"
)

// DirStore passes the suite. Its harness finds a thread's file as the only
// file a save to a fresh thread adds.
func TestDirStore(t *testing.T) {
	dirs := map[string]string{}
	dir := func(t testing.TB) string {
		if d, ok := dirs[t.Name()]; ok {
			return d
		}
		d := filepath.Join(t.TempDir(), "threads")
		dirs[t.Name()] = d
		return d
	}
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, c converter.PayloadCodec) tulip.ThreadStore {
			return tulip.DirStore{Dir: dir(t), Codec: c}
		},
		Corrupt: func(t testing.TB, thread string, b []byte) {
			require.NoError(t, os.WriteFile(tulip.DirStore{Dir: dir(t)}.Path(thread), b, 0o600))
		},
		Aside: func(t testing.TB, thread string) int {
			m, err := filepath.Glob(tulip.DirStore{Dir: dir(t)}.Path(thread) + ".bad-*")
			require.NoError(t, err)
			return len(m)
		},
	})
}
