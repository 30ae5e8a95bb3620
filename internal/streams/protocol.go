package streams

import (
	"encoding/base64"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// The handler names every SDK's workflow streams use.
const (
	PublishSignal = "__temporal_workflow_stream_publish"
	PollUpdate    = "__temporal_workflow_stream_poll"
	OffsetQuery   = "__temporal_workflow_stream_offset"
)

// ReadQuery is this package's addition to the protocol: a query that
// answers what a poll would (PollInput, ReadResult) without waiting, and
// without adding any event to the run's history (a poll that returns is
// an update: two events). Subscribe reads by it; a run of a worker older
// than it fails the query as unknown, and Subscribe polls instead. (Its
// name is not under "tulip.": those are tulip's documented queries, each
// answer with a schema in docs/schemas; this one is the stream's, beside
// the protocol's own handlers, and documented in docs/protocol.md.)
const ReadQuery = "tulip_stream_read"

// The ApplicationError types subscribers match.
const (
	// ErrTruncatedOffset: the poll asked for an offset already truncated;
	// poll again from 0 (the oldest item kept).
	ErrTruncatedOffset = "TruncatedOffset"
	// ErrStreamDraining: the run is handing over to its continuation (the
	// poll's validator refused it, so it left no event); poll again, and
	// the poll lands on the next run.
	ErrStreamDraining = "StreamDraining"
	// ErrTruncateOutOfRange: Truncate past the end of the log.
	ErrTruncateOutOfRange = "TruncateOutOfRange"
	// ErrAcceptedUpdateCompletedWorkflow is the server's failure of a poll
	// still open when its run closed.
	ErrAcceptedUpdateCompletedWorkflow = "AcceptedUpdateCompletedWorkflow"
)

// MaxPollBytes bounds a poll's answer (base64 data and topic names); an
// answer holds at least one item, and says MoreReady when it was cut.
const MaxPollBytes = 1_000_000

// PublishEntry is one item to publish: its topic and its data (base64 of
// a Payload's protobuf encoding).
type PublishEntry struct {
	Topic string `json:"topic"`
	Data  string `json:"data"`
}

// PublishInput is the publish signal's argument: a batch, and the
// publisher's id and sequence (a batch whose sequence is not above the
// last one seen from the same publisher is a duplicate, dropped; an empty
// id turns deduplication off).
type PublishInput struct {
	Items       []PublishEntry `json:"items"`
	PublisherID string         `json:"publisher_id"`
	Sequence    int64          `json:"sequence"`
}

// PollInput is the poll update's argument: the topics wanted (none: all)
// and the first offset wanted (0: the oldest item kept).
type PollInput struct {
	Topics     []string `json:"topics"`
	FromOffset int64    `json:"from_offset"`
}

// WireItem is one item of a poll's answer, with its offset in the log.
type WireItem struct {
	Topic  string `json:"topic"`
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
}

// PollResult is the poll update's answer: items (never null), the offset
// to poll from next, and whether more are ready now (the answer was cut
// at MaxPollBytes).
type PollResult struct {
	Items      []WireItem `json:"items"`
	NextOffset int64      `json:"next_offset"`
	MoreReady  bool       `json:"more_ready"`
}

// ReadResult is the read query's answer: a poll's answer (Items, never
// null, NextOffset, and MoreReady when it was cut at MaxPollBytes) given
// at once, however few items there are (none: NextOffset is the offset to
// read from next), with what a reader needs that a poll tells by failing.
type ReadResult struct {
	Items      []WireItem `json:"items"`
	NextOffset int64      `json:"next_offset"`
	MoreReady  bool       `json:"more_ready"`
	// BaseOffset is the oldest item kept: a read from an offset below it
	// (truncated; a poll fails with TruncatedOffset) answers from it.
	BaseOffset int64 `json:"base_offset"`
	// Draining says the run has handed its stream over (Drain): it is
	// about to close or continue as new, and it still answers reads, as
	// it will once closed, while a worker can replay it.
	Draining bool `json:"draining"`
}

// State is a stream handed to the next run by continue-as-new: the items
// kept (offsets are BaseOffset + index), and each publisher's last
// sequence and when it was seen (Unix seconds), for deduplication.
type State struct {
	Log               []WireItem         `json:"log"`
	BaseOffset        int64              `json:"base_offset"`
	PublisherSeqs     map[string]int64   `json:"publisher_sequences"`
	PublisherLastSeen map[string]float64 `json:"publisher_last_seen"`
	// Readers (this package's addition; other SDKs leave it out) are the
	// recent polls: when (Unix seconds) and from which offset. The next
	// run knows it has subscribers, and waits for them before it closes
	// (Settle).
	Readers []Reader `json:"readers,omitempty"`
}

// Reader says a subscriber had read every item before offset UpTo at
// time At (Unix seconds).
type Reader struct {
	At   float64 `json:"at"`
	UpTo int64   `json:"up_to"`
}

// EncodePayload is a payload's wire data: padded base64 of its protobuf
// encoding (deterministic).
func EncodePayload(p *commonpb.Payload) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("streams: encode payload: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// DecodePayload reads an item's wire data.
func DecodePayload(data string) (*commonpb.Payload, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("streams: item data is not base64: %w", err)
	}
	p := &commonpb.Payload{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("streams: item data is not a Payload: %w", err)
	}
	return p, nil
}

// Encode makes an item's wire data from a value, through the default
// payload converter (JSON for structs and maps: what every SDK decodes).
func Encode(value any) (string, error) {
	p, err := converter.GetDefaultDataConverter().ToPayload(value)
	if err != nil {
		return "", fmt.Errorf("streams: %w", err)
	}
	return EncodePayload(p)
}

// Decode reads an item's wire data into ptr, through the default payload
// converter.
func Decode(data string, ptr any) error {
	p, err := DecodePayload(data)
	if err != nil {
		return err
	}
	return converter.GetDefaultDataConverter().FromPayload(p, ptr)
}
