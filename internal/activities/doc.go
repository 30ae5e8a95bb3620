// Package activities holds the activities of an agent run and what runs
// in them: the model call (Models, with its conversation cache and the
// summary of a compaction), tool bodies and toolsets (Tool, Toolsets),
// sub-agents, and the thread's load and save (Checkpoints), each
// heartbeating from its own goroutine. A thread's state and reading it are
// package threadstate; the names these activities go by on the server are
// package protocol.
package activities
