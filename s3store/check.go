package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ErrNoConditionalWrites is Check's error for a service that accepted a
// write it should have refused: it ignores If-None-Match or If-Match on
// PutObject, and two machines saving one thread could lose the newer
// state.
var ErrNoConditionalWrites = errors.New("s3store: the service ignores conditional writes (If-None-Match, If-Match on PutObject); threads cannot be shared safely through it")

// probeKey is the one object Check writes.
const probeKey = "probe"

// Check makes sure the bucket can be reached with the credentials the
// chain gives and that the service honours the conditions the stores
// write with. It writes one small object, Prefix+"probe", once; then
// makes two writes that a conforming service refuses (If-None-Match: *
// on it, and If-Match: an ETag it does not have), so it changes nothing
// on one. It needs s3:GetObject and s3:PutObject, as the stores do, and
// makes at most four requests. A service that accepts either write gives
// ErrNoConditionalWrites; any other failure is the service's error,
// wrapped.
func (b *Bucket) Check(ctx context.Context) error {
	key := b.prefix + probeKey
	body := []byte("tulip: s3store's probe of conditional writes; keep it\n")
	put := func(ifNoneMatch, ifMatch *string) error {
		_, err := b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &b.bucket, Key: &key,
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			IfNoneMatch: ifNoneMatch, IfMatch: ifMatch})
		return err
	}
	// Make sure the probe exists: a first write, or a refusal because it
	// is already there.
	if err := put(aws.String("*"), nil); err != nil && !lostRace(err) {
		return fmt.Errorf("s3store: writing s3://%s/%s: %w", b.bucket, key, err)
	}
	if _, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key}); err != nil {
		return fmt.Errorf("s3store: reading s3://%s/%s: %w", b.bucket, key, err)
	}
	// It exists: both of these must be refused.
	for _, cond := range []struct{ ifNoneMatch, ifMatch *string }{
		{ifNoneMatch: aws.String("*")},
		{ifMatch: aws.String(`"00000000000000000000000000000000"`)},
	} {
		err := put(cond.ifNoneMatch, cond.ifMatch)
		if err == nil {
			return ErrNoConditionalWrites
		}
		if !lostRace(err) {
			return fmt.Errorf("s3store: a conditional write to s3://%s/%s: %w", b.bucket, key, err)
		}
	}
	return nil
}
