package tulip

import "github.com/tulip-temporal/tulip/internal/activities"

// ThreadStore keeps each thread's state outside Temporal, so that a thread
// outlives its runs' histories (a namespace's retention deletes them). A
// run saves the thread's state in full at its end; a run that starts on
// the thread reads history first and turns to the store for what history
// no longer holds (docs/threads.md). Both methods run in activities.
//
// Save must keep the newer of two states (the run that started later,
// ThreadRef.Started): an attempt that outlived its timeout may save late.
// DirStore is the file implementation; a deployment implements ThreadStore
// over a database or object store that outlives its workers.
type ThreadStore = activities.Checkpointer

// DirStore is a ThreadStore over a directory: one file per thread, JSON,
// encrypted when Codec is set (a codec.Keyring). Dir is required.
type DirStore = activities.DirStore

// ThreadRef names the thread a run belongs to, and the run.
type ThreadRef = activities.ThreadRef

// ThreadState is a thread's state between runs: its conversation and each
// agent's execution log.
type ThreadState = activities.Checkpoint
