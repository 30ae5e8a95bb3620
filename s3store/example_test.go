package s3store_test

import (
	"context"
	"fmt"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/s3store"
)

// One URL names the bucket; the threads and the blobs of every worker go
// there. Credentials come from the SDK's chain (AWS_ACCESS_KEY_ID, a
// profile, an instance role): without any, OpenURL fails with
// ErrNoCredentials. (Not run here: it needs credentials and a bucket; see
// package s3test for a real S3 server in tests.)
func Example() {
	bucket, err := s3store.OpenURL(context.Background(), "s3://tulip-state/prod/?region=eu-west-1")
	if err != nil {
		panic(err)
	}
	opts := tulip.Options{ThreadStore: bucket.Threads(nil)} // a codec.Keyring encrypts the states
	storage := blobstore.ExternalStorage(bucket.Blobs(), 0) // client.Options.ExternalStorage
	fmt.Println(opts.ThreadStore != nil, len(storage.Drivers))
}
