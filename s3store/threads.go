package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/threadstore"
)

// MaxRaces is how many times a save reads again after losing a race (a
// conditional write refused) before it returns an error (the activity is
// then retried).
const MaxRaces = 20

// MaxEntryBytes bounds a thread state an object may hold: a larger
// object is an EntryError, never read whole.
const MaxEntryBytes = 256 << 20

// Threads is a tulip.ThreadStore in the bucket: one object per thread,
// the same bytes DirStore writes (JSON, encrypted by codec when it is a
// codec.Keyring; nil: plain JSON). The run that started last wins, across
// every worker, by conditional writes.
func (b *Bucket) Threads(codec converter.PayloadCodec) *ThreadStore {
	return &ThreadStore{b: b, codec: codec}
}

// ThreadStore is Bucket.Threads's store.
type ThreadStore struct {
	b     *Bucket
	codec converter.PayloadCodec
}

var _ tulip.ThreadStore = (*ThreadStore)(nil)

// Key is the object that holds threadID's state.
func (s *ThreadStore) Key(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	return s.b.prefix + "threads/" + hex.EncodeToString(sum[:16]) + ".json"
}

// AsidePrefix is where the entries of threadID moved aside are.
func (s *ThreadStore) AsidePrefix(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	return s.b.prefix + "aside/" + hex.EncodeToString(sum[:16]) + ".json.bad-"
}

// Load implements tulip.ThreadStore.
func (s *ThreadStore) Load(ctx context.Context, ref tulip.ThreadRef) (*tulip.ThreadState, error) {
	h, _, err := s.read(ctx, ref.ThreadID)
	var bad *threadstate.EntryError
	if errors.As(err, &bad) {
		return nil, &tulip.StoreEntryError{Thread: bad.Thread, Entry: bad.Entry, Err: bad.Err}
	}
	if err != nil || h == nil {
		return nil, err
	}
	return threadstate.PublicState(h.State).(*tulip.ThreadState), nil
}

// read returns the thread's head and its ETag (nil, "" when there is
// none).
func (s *ThreadStore) read(ctx context.Context, threadID string) (*threadstore.StoredHead, string, error) {
	key := s.Key(threadID)
	out, err := s.b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.b.bucket, Key: &key})
	var missing *types.NoSuchKey
	if errors.As(err, &missing) || status(err) == http.StatusNotFound {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("s3store: reading %s: %w", key, err)
	}
	defer out.Body.Close()
	etag := aws.ToString(out.ETag)
	body, err := io.ReadAll(io.LimitReader(out.Body, MaxEntryBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("s3store: reading %s: %w", key, err)
	}
	entry := "s3://" + s.b.bucket + "/" + key
	if len(body) > MaxEntryBytes {
		return nil, etag, &threadstate.EntryError{Thread: threadID, Entry: entry, Err: fmt.Errorf("over %d bytes", MaxEntryBytes)}
	}
	h, err := threadstore.DecodeHead(body, s.codec, threadID, entry)
	return h, etag, err
}

// Save implements tulip.ThreadStore: it keeps state unless the object holds
// the state of a run that started later. The write is conditional on the
// object it read (If-Match its ETag, or If-None-Match: * when there was
// none); a refused write means another save won meanwhile, so it reads
// again and decides again. An entry that cannot be read is copied aside
// (Prefix+"aside/...", never deleted), logged once, and replaced.
func (s *ThreadStore) Save(ctx context.Context, ref tulip.ThreadRef, state *tulip.ThreadState) error {
	cp, err := threadstate.StateOf(state)
	if err != nil {
		return err
	}
	body, err := threadstore.EncodeHead(threadstore.StoredHead{Thread: ref.ThreadID, Run: ref.RunID, Started: ref.Started, State: cp}, s.codec)
	if err != nil {
		return err
	}
	key := s.Key(ref.ThreadID)
	for range MaxRaces {
		old, etag, err := s.read(ctx, ref.ThreadID)
		var bad *threadstate.EntryError
		switch {
		case errors.As(err, &bad):
			aside := fmt.Sprintf("%s%d", s.AsidePrefix(ref.ThreadID), time.Now().UnixNano())
			src := s.b.bucket + "/" + key
			if _, err := s.b.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.b.bucket, Key: &aside, CopySource: &src, CopySourceIfMatch: &etag}); err != nil {
				if lostRace(err) {
					continue
				}
				return fmt.Errorf("s3store: moving %s aside: %w", key, err)
			}
			threadstore.StoreLog(ctx, "tulip: thread store entry cannot be read; moved aside, saving the run's state fresh",
				"thread", ref.ThreadID, "entry", bad.Entry, "aside", "s3://"+s.b.bucket+"/"+aside, "reason", bad.Err.Error())
		case err != nil:
			return err
		case !threadstore.Newer(old, ref.Started):
			return nil
		}
		in := &s3.PutObjectInput{Bucket: &s.b.bucket, Key: &key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))}
		if etag == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(etag)
		}
		_, err = s.b.client.PutObject(ctx, in)
		if lostRace(err) {
			continue // another save won: read it and decide again
		}
		if err != nil {
			return fmt.Errorf("s3store: writing %s: %w", key, err)
		}
		return nil
	}
	return fmt.Errorf("s3store: writing %s: lost %d races to other saves in a row", key, MaxRaces)
}

// lostRace: a conditional write was refused because the object changed
// (412 Precondition Failed), or a concurrent conditional write was in
// flight (409 ConditionalRequestConflict).
func lostRace(err error) bool {
	switch status(err) {
	case http.StatusPreconditionFailed, http.StatusConflict:
		return true
	}
	return false
}

// status is the HTTP status of a service's error response (0: none).
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
