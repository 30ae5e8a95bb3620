package tulip

import "github.com/tulip-temporal/tulip/internal/activities"

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
type ThreadStore = activities.Checkpointer

// DirStore is a ThreadStore over a directory: one file per thread, JSON,
// encrypted when Codec is set (a codec.Keyring). Dir is required.
type DirStore = activities.DirStore

// ThreadRef names the thread a run belongs to, and the run.
type ThreadRef = activities.ThreadRef

// ThreadState is a thread's state between runs: its conversation and each
// agent's execution log.
type ThreadState = activities.Checkpoint

// StoreEntryError is a thread store entry that cannot be read (corrupt,
// or encrypted with a key the store lacks): never retried. A run that
// needs it fails at once with kind ThreadLost naming it; a run whose
// history holds the state saves over it, moving it aside.
type StoreEntryError = activities.EntryError
