// Package blobstore keeps large payloads out of Temporal history: a small
// content-addressed blob Store interface, two implementations (in memory,
// and a directory on disk), and a Temporal External Storage driver over any
// Store (converter.ExternalStorage, experimental in sdk v1.50).
//
// A payload over the threshold is stored under the SHA-256 of its bytes,
// and history holds only the claim. The same payload stored twice (an
// unchanged state carried across continue-as-new, say) is one blob. Blobs
// are never deleted by tulip: a blob a run references is there for as long
// as the store keeps it. A production store (S3, GCS) implements Store in a
// few lines: see the README.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Store keeps blobs by key. Keys are content hashes ("sha256-" + hex), so a
// Put of a key that exists may do nothing. Implementations are safe for
// concurrent use.
type Store interface {
	// Put stores data under key.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the blob stored under key, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
}

// ErrNotFound is wrapped by Get when no blob has the key.
var ErrNotFound = errors.New("blobstore: blob not found")

// Memory is a Store in memory. The zero value is ready.
type Memory struct {
	mu    sync.RWMutex
	blobs map[string][]byte
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.blobs == nil {
		m.blobs = map[string][]byte{}
	}
	if _, ok := m.blobs[key]; !ok {
		m.blobs[key] = append([]byte(nil), data...)
	}
	return nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.blobs[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return b, nil
}

// Stats returns the number of blobs and their total size.
func (m *Memory) Stats() (count int, bytes int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, b := range m.blobs {
		count++
		bytes += int64(len(b))
	}
	return count, bytes
}

// Dir is a Store in a directory: one file per blob, written atomically
// (a temporary file renamed into place), so a crash never leaves half a
// blob under its key.
type Dir struct {
	path string
}

// NewDir returns a Store in the directory path, creating it.
func NewDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("blobstore: %w", err)
	}
	return &Dir{path: path}, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

func (d *Dir) file(key string) (string, error) {
	if key == "" || strings.ContainsAny(key, `/\`) || strings.HasPrefix(key, ".") {
		return "", fmt.Errorf("blobstore: invalid key %q", key)
	}
	return filepath.Join(d.path, key), nil
}

// Put implements Store.
func (d *Dir) Put(_ context.Context, key string, data []byte) error {
	name, err := d.file(key)
	if err != nil {
		return err
	}
	if _, err := os.Stat(name); err == nil {
		return nil
	}
	tmp, err := os.CreateTemp(d.path, ".put-*")
	if err != nil {
		return fmt.Errorf("blobstore: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("blobstore: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("blobstore: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("blobstore: %w", err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("blobstore: %w", err)
	}
	return nil
}

// Get implements Store.
func (d *Dir) Get(_ context.Context, key string) ([]byte, error) {
	name, err := d.file(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("blobstore: %w", err)
	}
	return b, nil
}

// Sizes returns the size of each blob.
func (m *Memory) Sizes() []int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []int
	for _, b := range m.blobs {
		out = append(out, len(b))
	}
	return out
}
