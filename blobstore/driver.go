package blobstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/internal/claims"
)

// driverType is the Type of every driver.
const driverType = "tulip.blobstore"

// driver is a Temporal External Storage driver over a Store. A payload is
// stored under the content hash of its encoding, so equal payloads are one
// blob.
type driver struct {
	name  string
	store Store
}

var _ converter.StorageDriver = (*driver)(nil)

// newDriver returns a driver named name (stored in history beside each
// claim: keep it stable) over store.
func newDriver(name string, store Store) *driver { return &driver{name: name, store: store} }

// Name implements converter.StorageDriver.
func (d *driver) Name() string { return d.name }

// Type implements converter.StorageDriver.
func (d *driver) Type() string { return driverType }

// encode is a payload's stored form: the length of its metadata (4 bytes,
// big-endian), the metadata as JSON (keys sorted, values base64), then the
// data as is. Deterministic, so equal payloads have equal keys.
func encode(p *commonpb.Payload) ([]byte, error) {
	meta, err := json.Marshal(p.GetMetadata())
	if err != nil {
		return nil, err
	}
	out := make([]byte, 4, 4+len(meta)+len(p.GetData()))
	binary.BigEndian.PutUint32(out, uint32(len(meta)))
	out = append(append(out, meta...), p.GetData()...)
	return out, nil
}

func decode(b []byte) (*commonpb.Payload, error) {
	if len(b) < 4 {
		return nil, errors.New("too short")
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, errors.New("metadata length past the end")
	}
	var meta map[string][]byte
	if err := json.Unmarshal(b[4:4+n], &meta); err != nil {
		return nil, err
	}
	return &commonpb.Payload{Metadata: meta, Data: b[4+n:]}, nil
}

// Store implements converter.StorageDriver.
func (d *driver) Store(ctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	refs := make([]converter.StorageDriverClaim, len(payloads))
	for i, p := range payloads {
		b, err := encode(p)
		if err != nil {
			return nil, fmt.Errorf("blobstore: encode payload: %w", err)
		}
		key := claims.BlobKey(b)
		err = ctx.GetLimiter().Permit(ctx.Context, p, func() error { return d.store.Put(ctx.Context, key, b) })
		if err != nil {
			return nil, fmt.Errorf("blobstore: store %s: %w", key, err)
		}
		refs[i] = converter.StorageDriverClaim{ClaimData: map[string]string{"key": key}}
	}
	return refs, nil
}

// Retrieve implements converter.StorageDriver. A blob whose bytes do not
// hash to its key is refused.
func (d *driver) Retrieve(ctx converter.StorageDriverRetrieveContext, refs []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(refs))
	for i, c := range refs {
		key := c.ClaimData["key"]
		var b []byte
		err := ctx.GetLimiter().Permit(ctx.Context, c, func() error {
			var err error
			b, err = d.store.Get(ctx.Context, key)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("blobstore: retrieve %s: %w", key, err)
		}
		if claims.BlobKey(b) != key {
			return nil, fmt.Errorf("blobstore: blob %s is damaged (its content hashes differently)", key)
		}
		p, err := decode(b)
		if err != nil {
			return nil, fmt.Errorf("blobstore: blob %s: %w", key, err)
		}
		out[i] = p
	}
	return out, nil
}

// ExternalStorage returns client options' External Storage over store:
// payloads of threshold bytes and more (0: the SDK's default, 256 KiB) go
// to the store. Give the same value to every client, worker and replayer
// that reads these runs.
func ExternalStorage(store Store, threshold int) converter.ExternalStorage {
	return converter.ExternalStorage{Drivers: []converter.StorageDriver{newDriver("tulip-blobs", store)}, PayloadSizeThreshold: threshold}
}

// Resolve returns the payload p stands for: p itself, or, when p is an
// External Storage reference to a blob of this package's driver, the
// payload stored in store (as the SDK stored it: after the codec, so an
// encrypted payload stays encrypted). It reads references the way the SDK
// writes them (json/protobuf temporal.api.sdk.v1.ExternalStorageReference,
// and the older json/external-storage-reference).
func Resolve(ctx context.Context, store Store, p *commonpb.Payload) (*commonpb.Payload, error) {
	key, ok := referenceKey(p)
	if !ok || store == nil {
		return p, nil
	}
	b, err := store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("blobstore: retrieve %s: %w", key, err)
	}
	if claims.BlobKey(b) != key {
		return nil, fmt.Errorf("blobstore: blob %s is damaged (its content hashes differently)", key)
	}
	return decode(b)
}

// referenceKey is the blob key of an External Storage reference payload.
func referenceKey(p *commonpb.Payload) (string, bool) {
	c, ok := claims.Parse(p)
	if !ok {
		return "", false
	}
	k, ok := c.Data["key"]
	return k, ok
}
