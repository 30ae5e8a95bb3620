// Package threadstore keeps threads' states outside Temporal, so that a
// thread outlives the retention of the runs that made it: DirStore (a
// directory, one file a thread, saves ordered by a lock across processes)
// and the stored entry's format other stores share (StoredHead,
// EncodeHead, DecodeHead, Newer).
package threadstore
