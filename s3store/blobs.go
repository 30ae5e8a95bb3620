package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/internal/claims"
)

// MaxBlobBytes bounds a blob Get reads: a larger object is an error, never
// read whole.
const MaxBlobBytes = 2 << 30

// Blobs is a blobstore.Store in the bucket, under Prefix+"blobs/". Keys
// are content hashes and writes are conditional (If-None-Match: *), so a
// blob written twice, by racing workers or a retried attempt, is one
// object, never rewritten. Blobs hold what the client's data converter
// wrote: ciphertext, when it encrypts.
func (b *Bucket) Blobs() *BlobStore { return &BlobStore{b: b} }

// BlobStore is Bucket.Blobs's store.
type BlobStore struct{ b *Bucket }

var _ blobstore.Store = (*BlobStore)(nil)

func (s *BlobStore) key(k string) (string, error) {
	if k == "" || strings.ContainsAny(k, `/\`) || strings.HasPrefix(k, ".") {
		return "", fmt.Errorf("s3store: invalid blob key %q", k)
	}
	return s.b.prefix + "blobs/" + k, nil
}

// Put implements blobstore.Store.
func (s *BlobStore) Put(ctx context.Context, k string, data []byte) error {
	key, err := s.key(k)
	if err != nil {
		return err
	}
	_, err = s.b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.b.bucket, Key: &key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*")})
	if lostRace(err) {
		return nil // there already: the same bytes, by its key
	}
	if err != nil {
		return fmt.Errorf("s3store: writing blob %s: %w", key, err)
	}
	return nil
}

// Get implements blobstore.Store.
func (s *BlobStore) Get(ctx context.Context, k string) ([]byte, error) {
	key, err := s.key(k)
	if err != nil {
		return nil, err
	}
	out, err := s.b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.b.bucket, Key: &key})
	var missing *types.NoSuchKey
	if errors.As(err, &missing) || status(err) == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %s", blobstore.ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("s3store: reading blob %s: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, MaxBlobBytes+1))
	if err != nil {
		return nil, fmt.Errorf("s3store: reading blob %s: %w", key, err)
	}
	if len(b) > MaxBlobBytes {
		return nil, fmt.Errorf("s3store: blob %s is over %d bytes", key, MaxBlobBytes)
	}
	if claims.BlobKey(b) != k {
		return nil, fmt.Errorf("s3store: blob %s does not hash to its key (torn or altered)", key)
	}
	return b, nil
}
