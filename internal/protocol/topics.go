package protocol

// The topics of a run's stream (package streams: Temporal's Workflow
// Streams protocol). docs/protocol.md, "Live runs", gives their items.
const (
	// TopicCalls has one CallItem (workflow package) per tool-call
	// decision, published by the workflow as it decides.
	TopicCalls = "tulip.calls"
	// TopicText has the model's answers: TextItem deltas as the model
	// generates them (when the run streams text and the model can), and
	// one item with Done per answer.
	TopicText = "tulip.text"
	// TopicContext has one item per compaction of the model's view of the
	// conversation (docs/context.md): the workflow package's Compaction.
	TopicContext = "tulip.context"
)

// TextItem is one item of TopicText. A model that streams publishes its
// answer in pieces (Delta, Seq counting from 0) from the model activity;
// then the workflow publishes one item with Done, naming the attempt
// whose answer it took (Seq: how many pieces it had): a client keeps that
// attempt's pieces and drops a failed attempt's. When the model did not
// stream, or its pieces could not all be sent, the Done item holds the
// whole answer in Delta (a client takes it, and ignores pieces of that
// turn that come later).
type TextItem struct {
	Turn    int    `json:"turn"`
	Attempt int    `json:"attempt"`
	Seq     int    `json:"seq"`
	Delta   string `json:"delta,omitempty"`
	Done    bool   `json:"done,omitempty"`
}
