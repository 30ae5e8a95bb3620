package blobstore

import (
	"encoding/json"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// DriverType is the Type of every Driver.
const DriverType = "tulip.blobstore"

// Driver is a Temporal External Storage driver over a Store. A payload is
// stored under the content hash of its encoding, so equal payloads are one
// blob.
type Driver struct {
	name  string
	store Store
}

var _ converter.StorageDriver = (*Driver)(nil)

// NewDriver returns a driver named name (stored in history beside each
// claim: keep it stable) over store.
func NewDriver(name string, store Store) *Driver { return &Driver{name: name, store: store} }

// Name implements converter.StorageDriver.
func (d *Driver) Name() string { return d.name }

// Type implements converter.StorageDriver.
func (d *Driver) Type() string { return DriverType }

// wirePayload is a payload's stored form: deterministic JSON (map keys
// sorted, bytes as base64), so equal payloads have equal keys.
type wirePayload struct {
	Metadata map[string][]byte `json:"metadata,omitempty"`
	Data     []byte            `json:"data"`
}

// Store implements converter.StorageDriver.
func (d *Driver) Store(ctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	claims := make([]converter.StorageDriverClaim, len(payloads))
	for i, p := range payloads {
		b, err := json.Marshal(wirePayload{Metadata: p.GetMetadata(), Data: p.GetData()})
		if err != nil {
			return nil, fmt.Errorf("blobstore: encode payload: %w", err)
		}
		key := Key(b)
		err = ctx.GetLimiter().Permit(ctx.Context, p, func() error { return d.store.Put(ctx.Context, key, b) })
		if err != nil {
			return nil, fmt.Errorf("blobstore: store %s: %w", key, err)
		}
		claims[i] = converter.StorageDriverClaim{ClaimData: map[string]string{"key": key}}
	}
	return claims, nil
}

// Retrieve implements converter.StorageDriver. A blob whose bytes do not
// hash to its key is refused.
func (d *Driver) Retrieve(ctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(claims))
	for i, c := range claims {
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
		if Key(b) != key {
			return nil, fmt.Errorf("blobstore: blob %s is damaged (its content hashes differently)", key)
		}
		var w wirePayload
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, fmt.Errorf("blobstore: blob %s: %w", key, err)
		}
		out[i] = &commonpb.Payload{Metadata: w.Metadata, Data: w.Data}
	}
	return out, nil
}

// ExternalStorage returns client options' External Storage over store:
// payloads of threshold bytes and more (0: the SDK's default, 256 KiB) go
// to the store. Give the same value to every client, worker and replayer
// that reads these runs.
func ExternalStorage(store Store, threshold int) converter.ExternalStorage {
	return converter.ExternalStorage{Drivers: []converter.StorageDriver{NewDriver("tulip-blobs", store)}, PayloadSizeThreshold: threshold}
}
