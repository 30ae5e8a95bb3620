package s3test

import (
	"os"
	"testing"
)

// StartForTest runs a server for t, in a folder of t's, and ends it when t
// ends (printing the end of its logs if t failed). Without the weed binary
// it skips t, or fails it when CI=true or when $TULIP_WEED names no
// executable; it fails t if the server does not come up.
func StartForTest(t testing.TB) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv(EnvBinary) != "" {
			t.Fatal(err) // set, and wrong: never a reason to skip
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the S3 tests may not be skipped)", err)
		}
		t.Skip(err)
	}
	// t.TempDir's removal is registered first, so it runs after Close.
	dir := t.TempDir()
	s, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("s3server logs (%s):\n%s", dir, s.Logs())
		}
		s.Close()
	})
	return s
}
