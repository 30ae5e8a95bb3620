package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/tulip-temporal/tulip/internal/dedup"
)

// A thread outlives the retention of its runs (docs/threads.md). Its state
// is read from its runs' histories first; a TemporalCheckpointer with a
// Store also keeps each thread's newest state, in full, outside history,
// written by every run at its end, and reads it when history cannot give
// the state: the thread's runs are gone (a new-looking thread whose store
// has a head), or the state they left names runs that are gone. Without a
// store such a load fails with ErrThreadLost; it never starts empty.

// ErrThreadLost: the thread's state is gone. A run it names (the newest,
// or one that holds part of its state) was deleted, by the namespace's
// retention or by hand, and no thread store keeps the thread. The run
// fails at its start, non-retryable, instead of starting with an empty log
// (which would run an idempotent refund again).
const ErrThreadLost = "tulip.ThreadLost"

// threadLost is the ErrThreadLost failure for a thread whose run is gone.
func threadLost(threadID, runID string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("thread %s lost its state: run %s, which holds it, was deleted (the namespace's retention?) and no thread store keeps the thread", threadID, runID),
		ErrThreadLost, nil)
}

// goneRun is a run that a thread load needed and found deleted.
type goneRun struct{ run string }

func (g *goneRun) Error() string { return "run " + g.run + " was deleted" }

// missingRun returns a run that cp names and that no longer exists, or ""
// when none is missing. Retention deletes a thread's runs oldest first, so
// it asks only for the oldest run of each kind cp names: the first run
// holding part of its conversation, and the holder of its first record
// held elsewhere. (A run deleted by hand in the middle of a thread is
// found later, when its content is read: from the thread store, or with
// ErrThreadLost.)
func missingRun(ctx context.Context, c client.Client, threadID string, cp *Checkpoint) (string, error) {
	var runs []string
	if cv := cp.Conversation; cv != nil && len(cv.Parts) > 0 {
		runs = append(runs, cv.Parts[0].Run)
	}
	for _, snap := range cp.Agents {
		l, err := dedup.Restore(snap)
		if err != nil {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("thread %s: %v", threadID, err), ErrCheckpoint, nil)
		}
		for _, r := range l.Records() {
			if r.Thin() || r.ResultIn != nil {
				runs = append(runs, r.HeldBy())
				break
			}
		}
	}
	seen := map[string]bool{cp.Run: true, "": true} // cp.Run was read just now
	for _, run := range runs {
		if seen[run] {
			continue
		}
		seen[run] = true
		if _, err := c.DescribeWorkflowExecution(ctx, threadID, run); deleted(err) {
			return run, nil
		} else if err != nil {
			return "", fmt.Errorf("thread %s: reading run %s: %w", threadID, run, err)
		}
	}
	return "", nil
}

// DirStore is a thread store (TemporalCheckpointer.Store) that keeps each
// thread's newest state in a file of a directory, as JSON, encrypted when
// Codec is set. 'tulip dev --db FILE' and 'tulip chat --db FILE' keep one
// beside the database (FILE.threads). A production deployment keeps its
// threads in a store that outlives its workers (a database, an object
// store): implement Checkpointer over it as DirStore does over files.
//
// Save keeps the newer of two states: the one from the run that started
// later (ThreadRef.Started), so a late save (an attempt that outlived its
// timeout) never overwrites a newer run's state. The zero value is not
// usable: Dir is required.
type DirStore struct {
	// Dir holds the files. It is created on first save.
	Dir string
	// Codec encodes each file (a codec.Keyring encrypts it with your
	// workers' keys). Zero value: plain JSON.
	Codec converter.PayloadCodec
}

// storedHead is one thread's file.
type storedHead struct {
	Thread  string      `json:"thread"`
	Run     string      `json:"run"`
	Started time.Time   `json:"started"`
	State   *Checkpoint `json:"state"`
}

var dirStoreMu sync.Mutex // one save at a time in this process: read, compare, write

func (d DirStore) path(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	return filepath.Join(d.Dir, hex.EncodeToString(sum[:16])+".json")
}

// Load implements Checkpointer: the thread's newest saved state, or nil.
func (d DirStore) Load(_ context.Context, ref ThreadRef) (*Checkpoint, error) {
	h, err := d.read(ref.ThreadID)
	if err != nil || h == nil {
		return nil, err
	}
	return h.State, nil
}

func (d DirStore) read(threadID string) (*storedHead, error) {
	if d.Dir == "" {
		return nil, errors.New("tulip: DirStore has no Dir")
	}
	b, err := os.ReadFile(d.path(threadID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("thread store: %w", err)
	}
	p := &commonpb.Payload{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("thread store: %s: %w", d.path(threadID), err)
	}
	if d.Codec != nil {
		ps, err := d.Codec.Decode([]*commonpb.Payload{p})
		if err != nil {
			return nil, err // a *codec.KeyError names the key
		}
		p = ps[0]
	}
	h := &storedHead{}
	if err := json.Unmarshal(p.GetData(), h); err != nil {
		return nil, fmt.Errorf("thread store: %s: %w", d.path(threadID), err)
	}
	if h.Thread != threadID {
		return nil, fmt.Errorf("thread store: %s holds thread %q, not %q", d.path(threadID), h.Thread, threadID)
	}
	if h.State != nil && h.State.Run == "" {
		h.State.Run = h.Run
	}
	return h, nil
}

// Save implements Checkpointer: it keeps cp unless the file holds the
// state of a run that started later.
func (d DirStore) Save(_ context.Context, ref ThreadRef, cp *Checkpoint) error {
	dirStoreMu.Lock()
	defer dirStoreMu.Unlock()
	old, err := d.read(ref.ThreadID)
	if err != nil {
		return err
	}
	if old != nil && old.Started.After(ref.Started) {
		return nil
	}
	data, err := json.Marshal(storedHead{Thread: ref.ThreadID, Run: ref.RunID, Started: ref.Started, State: cp})
	if err != nil {
		return err
	}
	p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)}, Data: data}
	if d.Codec != nil {
		ps, err := d.Codec.Encode([]*commonpb.Payload{p})
		if err != nil {
			return err
		}
		p = ps[0]
	}
	b, err := proto.Marshal(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return fmt.Errorf("thread store: %w", err)
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
	if err := os.Rename(tmp.Name(), d.path(ref.ThreadID)); err != nil {
		return fmt.Errorf("thread store: %w", err)
	}
	return nil
}

// fetchBase reads the first base.Count messages of the calling run's
// conversation from the runs that hold them; a run deleted while this one
// was open (retention) gives its part from the thread store's state, which
// the digest check after it proves the same.
func (m *Models) fetchBase(ctx context.Context, base *Cursor) ([]Message, error) {
	info := activity.GetInfo(ctx)
	msgs, err := fetchConversation(ctx, base.Count)
	if err != nil && m.Store != nil {
		if head, serr := m.Store.Load(ctx, ThreadRef{ThreadID: info.WorkflowExecution.ID}); serr == nil && head != nil && head.Conversation == nil {
			msgs, err = fetchMessages(ctx, activity.GetClient(ctx), info.WorkflowExecution.ID, info.WorkflowExecution.RunID, 0, base.Count, head.Messages)
		}
	}
	return msgs, lost(info.WorkflowExecution.ID, err)
}

// lost turns the error of a read that needed a deleted run into
// ErrThreadLost (non-retryable: the run is not coming back).
func lost(threadID string, err error) error {
	var gone *goneRun
	if errors.As(err, &gone) {
		return threadLost(threadID, gone.run)
	}
	return err
}
