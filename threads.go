package tulip

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/threadstore"
)

// ThreadStore keeps each thread's state outside Temporal, so that a thread
// outlives its runs' histories (a namespace's retention deletes them). A
// run saves the thread's state in full at its end; a run that starts on
// the thread reads history first and turns to the store for what history
// no longer holds (docs/threads.md). Both methods run in activities.
//
// Save must keep the newer of two states (the run that started later,
// ThreadRef.Started), across every process that shares the store: an
// attempt that outlived its timeout may save late. An entry that cannot be
// read is a *StoreEntryError from Load, and Save moves it aside and writes.
// DirStore is the file implementation (one machine); module
// github.com/tulip-temporal/tulip/s3store keeps threads in an object
// store for many; package storetest is the suite every store must pass.
type ThreadStore interface {
	// Load returns the thread's newest state, nil when the store has none.
	Load(ctx context.Context, ref ThreadRef) (*ThreadState, error)
	// Save keeps state unless the store holds a newer one (a run that
	// started later, ThreadRef.Started).
	Save(ctx context.Context, ref ThreadRef, state *ThreadState) error
}

// DirStore is a ThreadStore over a directory: one file per thread, JSON,
// encrypted when Codec is set. It is for one machine: processes that
// share the directory take an OS file lock around each save's read,
// compare and rename.
type DirStore struct {
	// Dir holds the files (mode 0700; each file 0600). Required; it is
	// created on the first save.
	Dir string
	// Codec encodes each file (a *codec.Keyring encrypts it with your
	// workers' keys). Zero value: plain JSON.
	Codec converter.PayloadCodec
}

// Path is the file that holds threadID's state (its name a digest of the
// ID); an entry moved aside is beside it, Path+".bad-"+a time.
func (d DirStore) Path(threadID string) string { return threadstore.DirStore(d).Path(threadID) }

// Load implements ThreadStore.
func (d DirStore) Load(ctx context.Context, ref ThreadRef) (*ThreadState, error) {
	cp, err := threadstore.DirStore(d).Load(ctx, threadstate.ThreadRef(ref))
	if err != nil {
		return nil, publicEntryError(err)
	}
	return publicState(cp), nil
}

// Save implements ThreadStore.
func (d DirStore) Save(ctx context.Context, ref ThreadRef, state *ThreadState) error {
	cp, err := state.internal()
	if err != nil {
		return err
	}
	return publicEntryError(threadstore.DirStore(d).Save(ctx, threadstate.ThreadRef(ref), cp))
}

// ThreadRef names the thread a run belongs to, and the run.
type ThreadRef struct {
	// ThreadID is the thread, which is also the run's workflow ID.
	ThreadID string `json:"thread_id"`
	// RunID is the loading (or saving) run's own run ID.
	RunID string `json:"run_id"`
	// PreviousRunID is a hint: the thread's last closed run, when the
	// client that started the run knew it.
	PreviousRunID string `json:"previous_run_id,omitempty"`
	// NewThread: the client proved the thread has no earlier run.
	NewThread bool `json:"new_thread,omitempty"`
	// Started is when the run started (its workflow start time): of two
	// states, a store keeps the one whose run started later.
	Started time.Time `json:"started,omitempty"`
}

// ThreadState is a thread's state between runs: its conversation and each
// agent's execution log. A store keeps it as its JSON (json.Marshal, and
// json.Unmarshal into a new ThreadState on Load) and reads nothing else of
// it. Run, Messages, Usage and UsageByModel are there to read: changing
// them changes nothing the state holds. A ThreadState comes from a store,
// a run or JSON; one built by hand holds no state, and DirStore and
// s3store refuse to save it.
type ThreadState struct {
	// Run is the workflow run whose state this is.
	Run string
	// Messages is the conversation as the state holds it (agent.Thread
	// returns a state whose conversation is whole).
	Messages []Message
	// Usage is the thread's tokens through this state: every model
	// response of every run and agent on it (nil when none reported any;
	// threads count them from the first run that did).
	Usage *Usage
	// UsageByModel is Usage per model: the name the runs asked their
	// worker for (agent.Options.Model).
	UsageByModel map[string]*Usage
	cp           *threadstate.Checkpoint
}

// MarshalJSON is the state as a store keeps it.
func (s *ThreadState) MarshalJSON() ([]byte, error) { return json.Marshal(s.cp) }

// UnmarshalJSON reads a state a store kept.
func (s *ThreadState) UnmarshalJSON(b []byte) error {
	cp := &threadstate.Checkpoint{}
	if err := json.Unmarshal(b, cp); err != nil {
		return err
	}
	*s = *publicState(cp)
	return nil
}

// internal is the runtime's state s holds.
func (s *ThreadState) internal() (*threadstate.Checkpoint, error) {
	if s == nil {
		return nil, nil
	}
	if s.cp == nil {
		return nil, &nilOptionError{"ThreadState (built by hand: a state comes from a store, a run or JSON)"}
	}
	return s.cp, nil
}

func publicState(cp *threadstate.Checkpoint) *ThreadState {
	if cp == nil {
		return nil
	}
	st := &ThreadState{Run: cp.Run, Messages: publicMessages(cp.Messages), Usage: (*Usage)(cp.Usage.Plus(nil)), cp: cp}
	for name, u := range cp.UsageByModel {
		if st.UsageByModel == nil {
			st.UsageByModel = map[string]*Usage{}
		}
		st.UsageByModel[name] = (*Usage)(u.Plus(nil))
	}
	return st
}

// StoreEntryError is a thread store entry that cannot be read (corrupt,
// or encrypted with a key the store lacks): never retried. A store returns
// it from Load (and from Save's read); a run that needs the entry fails at
// once with kind ThreadLost naming it, and a run whose history holds the
// state saves over it, moving it aside.
type StoreEntryError struct {
	// Thread is the thread; Entry where the entry is (a file, an object
	// key).
	Thread string
	Entry  string
	// Err is why it cannot be read (a *codec.KeyError names a missing
	// key).
	Err error
}

func (e *StoreEntryError) Error() string {
	return (&threadstate.EntryError{Thread: e.Thread, Entry: e.Entry, Err: e.Err}).Error()
}

// Unwrap is Err.
func (e *StoreEntryError) Unwrap() error { return e.Err }

// publicEntryError is err with the runtime's entry error as a
// StoreEntryError.
func publicEntryError(err error) error {
	var ie *threadstate.EntryError
	if errors.As(err, &ie) {
		return &StoreEntryError{Thread: ie.Thread, Entry: ie.Entry, Err: ie.Err}
	}
	return err
}

// store adapts a ThreadStore to the runtime's.
type store struct{ s ThreadStore }

func (a store) Load(ctx context.Context, ref threadstate.ThreadRef) (*threadstate.Checkpoint, error) {
	st, err := a.s.Load(ctx, ThreadRef(ref))
	if err != nil {
		var pe *StoreEntryError
		if errors.As(err, &pe) {
			return nil, &threadstate.EntryError{Thread: pe.Thread, Entry: pe.Entry, Err: pe.Err}
		}
		return nil, err
	}
	return st.internal()
}

func (a store) Save(ctx context.Context, ref threadstate.ThreadRef, cp *threadstate.Checkpoint) error {
	err := a.s.Save(ctx, ThreadRef(ref), publicState(cp))
	var pe *StoreEntryError
	if errors.As(err, &pe) {
		return &threadstate.EntryError{Thread: pe.Thread, Entry: pe.Entry, Err: pe.Err}
	}
	return err
}

func init() {
	// s3store, storetest, the CLI and the module's tests hold the
	// runtime's states and stores on one side and public ones on the
	// other.
	threadstate.PublicStore = func(s any) threadstate.Checkpointer {
		if is, ok := s.(threadstate.Checkpointer); ok {
			return is
		}
		return store{s.(ThreadStore)}
	}
	threadstate.PublicState = func(cp *threadstate.Checkpoint) any { return publicState(cp) }
	threadstate.StateOf = func(st any) (*threadstate.Checkpoint, error) { return st.(*ThreadState).internal() }
}
