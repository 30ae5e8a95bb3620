// Package threadstate is a thread's state and how to read it: the
// conversation (Message, ToolCall, Usage), the state a run leaves for the
// thread's next run (Checkpoint), what holds it (Checkpointer), and
// reading it from Temporal itself (TemporalCheckpointer,
// ResolveCheckpoint, FetchMessages, FetchRecords), where a state holds
// messages and records by reference to the runs that made them. Clients
// (a fork's start, inspect, explain) and activities (a run's thread load)
// share it.
package threadstate
