package blobstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/blobstore"
)

// Large payloads (a megabyte tool result, a long conversation) go to a
// blob store instead of history: give the same External Storage to every
// client, worker and replayer that reads the runs.
func ExampleExternalStorage() {
	dir, err := os.MkdirTemp("", "blobs")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := blobstore.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		panic(err)
	}
	opts := client.Options{ExternalStorage: blobstore.ExternalStorage(store, 64<<10)} // 64 KiB and more
	fmt.Println(len(opts.ExternalStorage.Drivers))
	// Output: 1
}

// Blobs are kept by content hash: a Put of the same bytes twice is one
// blob.
func ExampleMemory() {
	ctx := context.Background()
	var m blobstore.Memory
	data := []byte(`{"rows": 100000}`)
	sum := sha256.Sum256(data)
	key := "sha256-" + hex.EncodeToString(sum[:]) // the content address
	_ = m.Put(ctx, key, data)
	_ = m.Put(ctx, key, data)
	got, _ := m.Get(ctx, key)
	n, _ := m.Stats()
	fmt.Println(string(got), n)
	_, err := m.Get(ctx, "sha256-other")
	fmt.Println(errors.Is(err, blobstore.ErrNotFound))
	// Output:
	// {"rows": 100000} 1
	// true
}
