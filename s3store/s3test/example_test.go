package s3test_test

import (
	"context"
	"testing"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/s3store"
	"github.com/tulip-temporal/tulip/s3store/s3test"
)

// A test of a worker whose threads live in a bucket: a real S3 server for
// the test (skipped until weed is installed, with the command that
// installs it), and s3store on it.
func TestWithABucket(t *testing.T) {
	srv := s3test.StartForTest(t)
	bucket, err := s3store.Open(context.Background(), srv.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Check(context.Background()); err != nil {
		t.Fatal(err) // it honours conditional writes
	}
	opts := tulip.Options{ThreadStore: bucket.Threads(nil)}
	_ = opts // give it to tulip.NewPlugin, and run the worker on the embedded server
}
