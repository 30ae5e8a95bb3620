package blobstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/internal/claims"
)

// One conformance suite, run against every Store.
func TestStores(t *testing.T) {
	stores := map[string]func(t *testing.T) blobstore.Store{
		"memory": func(*testing.T) blobstore.Store { return &blobstore.Memory{} },
		"dir": func(t *testing.T) blobstore.Store {
			d, err := blobstore.NewDir(filepath.Join(t.TempDir(), "blobs"))
			require.NoError(t, err)
			return d
		},
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			_, err := s.Get(ctx, claims.BlobKey([]byte("x")))
			assert.ErrorIs(t, err, blobstore.ErrNotFound)
			data := []byte("hello")
			key := claims.BlobKey(data)
			require.NoError(t, s.Put(ctx, key, data))
			require.NoError(t, s.Put(ctx, key, data), "a second put of the same content is fine")
			got, err := s.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, data, got)
			data[0] = 'j' // the store holds its own copy
			got, _ = s.Get(ctx, key)
			assert.Equal(t, "hello", string(got))
		})
	}
}

func TestDirRefusesPathKeys(t *testing.T) {
	d, err := blobstore.NewDir(t.TempDir())
	require.NoError(t, err)
	for _, k := range []string{"", "../x", "a/b", ".hidden"} {
		assert.Error(t, d.Put(context.Background(), k, []byte("x")), k)
	}
}

// The driver stores equal payloads once, round-trips them exactly, and
// refuses a damaged blob.
func TestDriver(t *testing.T) {
	dir := t.TempDir()
	store, err := blobstore.NewDir(dir)
	require.NoError(t, err)
	d := blobstore.ExternalStorage(store, 0).Drivers[0]
	p := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain"), "b": []byte{0, 1}}, Data: []byte(`{"big":true}`)}
	sctx := converter.StorageDriverStoreContext{Context: context.Background()}
	refs, err := d.Store(sctx, []*commonpb.Payload{p, p})
	require.NoError(t, err)
	assert.Equal(t, refs[0], refs[1])
	files, _ := os.ReadDir(dir)
	assert.Len(t, files, 1, "one blob for two equal payloads")
	rctx := converter.StorageDriverRetrieveContext{Context: context.Background()}
	got, err := d.Retrieve(rctx, refs[:1])
	require.NoError(t, err)
	assert.Equal(t, p.GetData(), got[0].GetData())
	assert.Equal(t, p.GetMetadata(), got[0].GetMetadata())

	require.NoError(t, os.WriteFile(filepath.Join(dir, refs[0].ClaimData["key"]), []byte("\x00\x00\x00\x02{}x"), 0o644))
	_, err = d.Retrieve(rctx, refs[:1])
	require.Error(t, err)
	assert.False(t, errors.Is(err, blobstore.ErrNotFound))
	assert.Contains(t, err.Error(), "damaged")
}
