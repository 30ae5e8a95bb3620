// Package streams implements the workflow and activity sides of Temporal's
// Workflow Streams protocol, the cross-SDK wire protocol of the Go,
// Python, TypeScript, Java and .NET "workflow streams" modules, so that
// their clients (the official @temporalio/workflow-streams among them)
// can subscribe to a tulip run:
//
//   - the signal __temporal_workflow_stream_publish appends a batch of
//     items (PublishInput), deduplicated by publisher id and sequence;
//   - the update __temporal_workflow_stream_poll long-polls for items at
//     or after an offset, on some topics (PollInput, PollResult);
//   - the query __temporal_workflow_stream_offset answers the next offset;
//   - and this package's own query, tulip_stream_read (ReadQuery), answers
//     what a poll would, at once (PollInput, ReadResult).
//
// An item's data is a Temporal Payload, carried on the wire as padded
// base64 of its protobuf encoding; the envelopes are JSON (the default
// converter), and a codec on the client applies to the whole envelope.
//
// Stream is the workflow side: an append-only log of items, its handlers,
// bounded truncation, and the hand-over across continue-as-new (Drain,
// then State into the next run's input). Publisher is the activity side:
// batches sent by signal, each batch retried under the same sequence.
// Subscribe is a Go subscriber that follows a run through continue-as-new.
//
// Costs: a publish by signal is one history event per batch; items
// published by workflow code (Stream.Publish) add no event at all. A poll
// that returns is an update: two events (accepted, completed), which every
// SDK's workflow streams client pays per poll. Subscribe reads by the read
// query instead, which adds no event (a query is not recorded): a reader,
// busy or idle, adds nothing to the run's history; it costs the worker a
// query answered every 20 to 500 ms (SubscribeOptions.MinWait, MaxWait).
// It polls only a run without the query (an older worker), or when told to
// (SubscribeOptions.UpdatePoll).
package streams
