package threadstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tulip-temporal/tulip/internal/threadstate"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// A thread outlives the retention of its runs (docs/threads.md). Its state
// is read from its runs' histories first; a TemporalCheckpointer with a
// Store also keeps each thread's newest state, in full, outside history,
// written by every run at its end, and reads it when history cannot give
// the state: the thread's runs are gone (a new-looking thread whose store
// has a head), or the state they left names runs that are gone. Without a
// store such a load fails with ErrThreadLost; it never starts empty.

// StoredHead is what a thread store keeps for a thread: the state of the
// run that started last (Started) and which run that is. Stores encode it
// with EncodeHead and read it with DecodeHead, so every store holds the
// same bytes and encrypts them the same way.
type StoredHead struct {
	Thread  string                  `json:"thread"`
	Run     string                  `json:"run"`
	Started time.Time               `json:"started"`
	State   *threadstate.Checkpoint `json:"state"`
}

// EncodeHead is h as a store keeps it: a Temporal payload (JSON), encoded
// by c (a codec.Keyring encrypts it; nil: plain JSON), in its protobuf
// wire form.
func EncodeHead(h StoredHead, c converter.PayloadCodec) ([]byte, error) {
	data, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)}, Data: data}
	if c != nil {
		ps, err := c.Encode([]*commonpb.Payload{p})
		if err != nil {
			return nil, err
		}
		p = ps[0]
	}
	return proto.Marshal(p)
}

// DecodeHead reads what EncodeHead wrote for threadID. Bytes it cannot
// read (corrupt, a key c lacks, another thread's) are an *EntryError
// naming entry.
func DecodeHead(b []byte, c converter.PayloadCodec, threadID, entry string) (*StoredHead, error) {
	bad := func(err error) error { return &threadstate.EntryError{Thread: threadID, Entry: entry, Err: err} }
	p := &commonpb.Payload{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, bad(err)
	}
	if len(p.GetMetadata()) == 0 {
		return nil, bad(errors.New("not a stored thread state (no payload metadata)"))
	}
	if c != nil {
		ps, err := c.Decode([]*commonpb.Payload{p})
		if err != nil {
			return nil, bad(err) // a *codec.KeyError names the key
		}
		p = ps[0]
	}
	h := &StoredHead{}
	if err := json.Unmarshal(p.GetData(), h); err != nil {
		return nil, bad(err)
	}
	if h.Thread != threadID {
		return nil, bad(fmt.Errorf("it holds thread %q", h.Thread))
	}
	if h.State != nil && h.State.Run == "" {
		h.State.Run = h.Run
	}
	return h, nil
}

// Newer reports whether a state from a run started at started may replace
// old (nil: none): the store keeps the run that started last.
func Newer(old *StoredHead, started time.Time) bool {
	return old == nil || !old.Started.After(started)
}

// StoreLog is where a store says it moved a bad entry aside: the
// activity's logger inside an activity, else the process's slog default.
func StoreLog(ctx context.Context, msg string, kv ...any) {
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn(msg, kv...)
		return
	}
	slog.Default().Warn(msg, kv...)
}

// DirStore is a thread store (TemporalCheckpointer.Store) that keeps each
// thread's newest state in a file of a directory, as JSON, encrypted when
// Codec is set. 'tulip dev --db FILE' and 'tulip chat --db FILE' keep one
// beside the database (FILE.threads). It is for one machine: processes
// that share the directory take an OS file lock (flock) around each save's
// read, compare and rename, so they keep the newest state between them; a
// network file system's locks are not trusted. Workers on many machines
// share an object store instead (module
// github.com/tulip-temporal/tulip/s3store).
//
// Save keeps the newer of two states: the one from the run that started
// later (ThreadRef.Started), so a late save (an attempt that outlived its
// timeout) never overwrites a newer run's state. The file and then the
// directory are synced before Save returns. The directory is kept at mode
// 0700 and its files at 0600, an existing directory too. A file that
// cannot be read (EntryError) is renamed aside (NAME.bad-UNIXNANO, never
// deleted) by the next save, which logs it once. The zero value is not
// usable: Dir is required.
type DirStore struct {
	// Dir holds the files. It is created on first save.
	Dir string
	// Codec encodes each file (a codec.Keyring encrypts it with your
	// workers' keys). Zero value: plain JSON.
	Codec converter.PayloadCodec
}

var dirStoreMu sync.Mutex // one save at a time in this process; lockDir orders processes

// Path is the file that holds threadID's state.
func (d DirStore) Path(threadID string) string { return d.path(threadID) }

func (d DirStore) path(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	return filepath.Join(d.Dir, hex.EncodeToString(sum[:16])+".json")
}

// Load implements Checkpointer: the thread's newest saved state, or nil.
func (d DirStore) Load(_ context.Context, ref threadstate.ThreadRef) (*threadstate.Checkpoint, error) {
	h, err := d.read(ref.ThreadID)
	if err != nil || h == nil {
		return nil, err
	}
	return h.State, nil
}

func (d DirStore) read(threadID string) (*StoredHead, error) {
	if d.Dir == "" {
		return nil, errors.New("tulip: DirStore has no Dir")
	}
	name := d.path(threadID)
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if fi, serr := os.Stat(name); errors.Is(err, os.ErrPermission) || (serr == nil && !fi.Mode().IsRegular()) {
			// Not a file this store can read, however often it tries.
			return nil, &threadstate.EntryError{Thread: threadID, Entry: name, Err: err}
		}
		return nil, fmt.Errorf("thread store: %w", err)
	}
	return DecodeHead(b, d.Codec, threadID, name)
}

// Save implements Checkpointer: it keeps cp unless the file holds the
// state of a run that started later.
func (d DirStore) Save(ctx context.Context, ref threadstate.ThreadRef, cp *threadstate.Checkpoint) error {
	b, err := EncodeHead(StoredHead{Thread: ref.ThreadID, Run: ref.RunID, Started: ref.Started, State: cp}, d.Codec)
	if err != nil {
		return err
	}
	if err := d.prepareDir(); err != nil {
		return err
	}
	if !testNoLock {
		dirStoreMu.Lock()
		defer dirStoreMu.Unlock()
		unlock, err := lockDir(d.Dir)
		if err != nil {
			return fmt.Errorf("thread store: locking %s: %w", d.Dir, err)
		}
		defer unlock()
	}
	name := d.path(ref.ThreadID)
	old, err := d.read(ref.ThreadID)
	var bad *threadstate.EntryError
	switch {
	case errors.As(err, &bad):
		aside := fmt.Sprintf("%s.bad-%d", name, time.Now().UnixNano())
		if err := os.Rename(name, aside); err != nil {
			return fmt.Errorf("thread store: moving %s aside: %w", name, err)
		}
		StoreLog(ctx, "tulip: thread store entry cannot be read; moved aside, saving the run's state fresh",
			"thread", ref.ThreadID, "entry", name, "aside", aside, "reason", bad.Err.Error())
	case err != nil:
		return err
	case !Newer(old, ref.Started) && !testNoCompare:
		return nil
	}
	tmp, err := os.CreateTemp(d.Dir, ".save-*")
	if err != nil {
		return fmt.Errorf("thread store: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("thread store: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("thread store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("thread store: %w", err)
	}
	if testHookBeforeRename != nil {
		testHookBeforeRename()
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("thread store: %w", err)
	}
	return syncDir(d.Dir)
}

// Set by tests only: a hook between a save's compare and its rename, and
// the controls that break the store on purpose (no lock, no compare).
var (
	testHookBeforeRename      func()
	testNoLock, testNoCompare bool
)

// prepareDir makes Dir, mode 0700, and sets that mode on a Dir that
// already exists with another.
func (d DirStore) prepareDir() error {
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return fmt.Errorf("thread store: %w", err)
	}
	fi, err := os.Stat(d.Dir)
	if err != nil {
		return fmt.Errorf("thread store: %w", err)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(d.Dir, 0o700); err != nil {
			return fmt.Errorf("thread store: %s has mode %v and cannot be made 0700: %w", d.Dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("thread store: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("thread store: syncing %s: %w", dir, err)
	}
	return nil
}
