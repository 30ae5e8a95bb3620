package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// TextStream, in a ModelInput, asks the model activity to stream the
// answer as it is generated: what the model generated in each BatchMillis
// (zero: 300) is one piece, sent to the run's stream by signal.
type TextStream struct {
	BatchMillis int `json:"batch_ms,omitempty"`
	// Publisher is the run's publisher token: the activity's publisher id
	// is PublisherID(Publisher, turn, attempt), and the run appends only
	// batches from such ids (it refuses anyone else's). Empty in runs
	// recorded before the run refused them.
	Publisher string `json:"publisher,omitempty"`
}

// PublisherID is the publisher id of the model activity's attempt for a
// run's token: token/turn/attempt/16 random hex digits (an attempt is a
// publisher of its own, its sequence from 1).
func PublisherID(token string, turn, attempt int) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%d/%s", token, turn, attempt, hex.EncodeToString(b[:]))
}

// Streamed, in a ModelResponse, says the model activity streamed the
// answer in Pieces pieces in attempt Attempt.
type Streamed struct {
	Attempt int `json:"attempt"`
	Pieces  int `json:"pieces"`
}

// textPublisher streams one model call's answer. The model's deltas (a
// token or a word each) are joined into one piece per batch interval, so
// that a piece costs its items' envelope once, not once per token.
type textPublisher struct {
	pub     *streams.Publisher
	turn    int
	attempt int
	mu      sync.Mutex
	text    strings.Builder // deltas not yet in a piece
	pieces  int
	failed  bool
	started bool
}

// textStream sets req.OnText to publish to the run's stream when the input
// asks for it (and this is an activity with a client); nil otherwise.
func (m *Models) textStream(ctx context.Context, in ModelInput, req *ModelRequest) *textPublisher {
	if in.TextStream == nil || !activity.IsActivity(ctx) {
		return nil
	}
	info := activity.GetInfo(ctx)
	c := activity.GetClient(ctx)
	if c == nil {
		return nil
	}
	interval := time.Duration(in.TextStream.BatchMillis) * time.Millisecond
	if interval <= 0 {
		interval = 300 * time.Millisecond
	}
	t := &textPublisher{turn: in.Turn, attempt: int(info.Attempt)}
	// The publisher's sender makes the pieces: each batch, the deltas so
	// far become one piece, sent in that batch.
	opts := streams.PublisherOptions{BatchInterval: interval, OnBatch: t.cut}
	if in.TextStream.Publisher != "" {
		opts.ID = PublisherID(in.TextStream.Publisher, in.Turn, t.attempt)
	}
	t.pub = streams.NewPublisher(c, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, opts)
	req.OnText = func(delta string) {
		if delta == "" {
			return
		}
		t.mu.Lock()
		t.text.WriteString(delta)
		start := !t.started
		t.started = true
		t.mu.Unlock()
		if start {
			t.pub.Start()
		}
	}
	return t
}

// cut makes the deltas so far one piece.
func (t *textPublisher) cut() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.text.Len() == 0 {
		return
	}
	if err := t.pub.Publish(protocol.TopicText, protocol.TextItem{Turn: t.turn, Attempt: t.attempt, Seq: t.pieces, Delta: t.text.String()}); err != nil {
		t.failed = true
	}
	t.pieces++
	t.text.Reset()
}

// close sends what is left (before the activity completes, so the pieces
// come before the workflow's Done item) and says what was streamed; nil
// when the model streamed nothing, or when a piece could not be sent: then
// the Done item carries the whole answer (it is whole in the response).
func (t *textPublisher) close(ctx context.Context) *Streamed {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := t.pub.Close(cctx) // the last piece: Close calls OnBatch once more
	if err != nil {
		activity.GetLogger(ctx).Warn("tulip: streaming the model's answer", "error", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pieces == 0 || err != nil || t.failed {
		return nil
	}
	return &Streamed{Attempt: t.attempt, Pieces: t.pieces}
}
