package streams

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// PublisherOptions configure a Publisher. The zero value is ready.
type PublisherOptions struct {
	// BatchInterval is how often buffered items are sent (one signal, one
	// history event, per batch). Zero: 300 ms.
	BatchInterval time.Duration
	// MaxRetry is how long a batch is retried (under the same sequence, so
	// the stream never appends it twice) before it is dropped with
	// ErrDropped. Zero: 1 minute.
	MaxRetry time.Duration
	// ID is the publisher's id. Zero: 16 random hex digits; a retried
	// activity attempt is a new publisher.
	ID string
	// OnBatch, when set, is called by the background sender each
	// BatchInterval before it sends (not under the publisher's lock: it
	// may Publish): a producer that joins small deltas into one item per
	// batch publishes it there. Zero value: none.
	OnBatch func()
}

// ErrDropped: a batch could not be delivered within MaxRetry, or the run
// has closed. Its items are not in the stream.
var ErrDropped = errors.New("streams: a batch could not be delivered")

// Publisher sends items to a run's stream by signal, in batches. It is
// safe for concurrent use. Close it to send what is buffered.
type Publisher struct {
	c                 client.Client
	workflowID, runID string
	opts              PublisherOptions

	mu      sync.Mutex
	buffer  []PublishEntry
	started bool
	stop    chan struct{}
	done    chan struct{}
	err     error // the first ErrDropped

	send      sync.Mutex // one batch in flight
	sequence  int64      // the last sequence the stream confirmed
	pending   []PublishEntry
	pendingAt time.Time
}

// NewPublisher returns a publisher to the stream of the workflow run
// (runID "" is the latest run).
func NewPublisher(c client.Client, workflowID, runID string, opts PublisherOptions) *Publisher {
	if opts.BatchInterval <= 0 {
		opts.BatchInterval = 300 * time.Millisecond
	}
	if opts.MaxRetry <= 0 {
		opts.MaxRetry = time.Minute
	}
	if opts.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.ID = hex.EncodeToString(b[:])
	}
	return &Publisher{c: c, workflowID: workflowID, runID: runID, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
}

// ID is the publisher's id.
func (p *Publisher) ID() string { return p.opts.ID }

// Publish buffers value for topic (encoded by the default payload
// converter); it is sent within BatchInterval.
func (p *Publisher) Publish(topic string, value any) error {
	data, err := Encode(value)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buffer = append(p.buffer, PublishEntry{Topic: topic, Data: data})
	p.startLocked()
	return nil
}

// Start starts the background sender before the first Publish (for an
// OnBatch producer, whose first item comes from the first batch).
func (p *Publisher) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.startLocked()
}

func (p *Publisher) startLocked() {
	if !p.started {
		p.started = true
		go p.flusher()
	}
}

func (p *Publisher) flusher() {
	defer close(p.done)
	t := time.NewTicker(p.opts.BatchInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			if p.opts.OnBatch != nil {
				p.opts.OnBatch()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := p.flushOnce(ctx); errors.Is(err, ErrDropped) {
				p.mu.Lock()
				if p.err == nil {
					p.err = err
				}
				p.mu.Unlock()
			}
			cancel()
		}
	}
}

// flushOnce sends the pending batch again, or else the buffer as a new
// batch.
func (p *Publisher) flushOnce(ctx context.Context) error {
	p.send.Lock()
	defer p.send.Unlock()
	if p.pending == nil {
		p.mu.Lock()
		p.pending, p.buffer = p.buffer, nil
		p.mu.Unlock()
		if len(p.pending) == 0 {
			p.pending = nil
			return nil
		}
		p.pendingAt = time.Now()
	}
	seq := p.sequence + 1
	err := p.c.SignalWorkflow(ctx, p.workflowID, p.runID, PublishSignal, PublishInput{Items: p.pending, PublisherID: p.opts.ID, Sequence: seq})
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		p.sequence, p.pending = seq, nil
		return nil
	case errors.As(err, &nf) || time.Since(p.pendingAt) > p.opts.MaxRetry:
		// The run closed, or the batch waited too long: drop it, and move
		// the sequence on so a later batch is never taken for it.
		n := len(p.pending)
		p.sequence, p.pending = seq, nil
		return fmt.Errorf("%w (%d items): %v", ErrDropped, n, err)
	default:
		return err
	}
}

// Flush sends everything buffered so far, and returns once the stream has
// it (or the batch was dropped, or ctx ended).
func (p *Publisher) Flush(ctx context.Context) error {
	for {
		p.mu.Lock()
		empty := len(p.buffer) == 0
		p.mu.Unlock()
		p.send.Lock()
		idle := p.pending == nil
		p.send.Unlock()
		if empty && idle {
			return nil
		}
		if err := p.flushOnce(ctx); err != nil {
			if errors.Is(err, ErrDropped) || ctx.Err() != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// Close stops the background sender, calls OnBatch a last time, and
// flushes what is left. It reports the first batch dropped, if any.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	started := p.started
	p.started = true // no flusher after Close
	p.mu.Unlock()
	if started {
		close(p.stop)
		<-p.done
	}
	if p.opts.OnBatch != nil {
		p.opts.OnBatch()
	}
	err := p.Flush(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	return err
}
