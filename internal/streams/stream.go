package streams

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Options bound a Stream. The zero value is ready.
type Options struct {
	// MaxItems and MaxBytes bound the items a run keeps (bytes of wire data
	// and topic names): past either, the oldest are truncated, and a
	// subscriber that far behind polls again from the oldest kept (the
	// official clients do so on TruncatedOffset). Zero: 4,096 items, 1 MiB.
	MaxItems int
	MaxBytes int
	// CarryBytes bounds the items handed to the next run by continue-as-new:
	// the items every subscriber that polled within ReadWindow has read
	// are left behind, and of the rest at most CarryBytes of the newest go.
	// When no subscriber polled within ReadWindow, none go: a stream nobody
	// reads adds nothing to the next run's input. Zero: 256 KiB.
	CarryBytes int
	// ReadWindow: a subscriber that polled within it counts as reading
	// (above). Zero: 1 minute.
	ReadWindow time.Duration
	// PublisherTTL is how long a publisher's last sequence is kept for
	// deduplication across continue-as-new. Zero: 15 minutes.
	PublisherTTL time.Duration
	// Accept, when set, decides whether a batch published by signal (not
	// a duplicate) is appended: a batch it refuses is dropped whole, and
	// its publisher's sequence is not kept. It runs in workflow code, in
	// the order batches arrive (replay calls it again for the same
	// batches). Zero value: every batch (anyone who can signal the run
	// publishes, on any topic).
	Accept func(PublishInput) bool `json:"-"`
	// ReadOnDemand reads the batches published by signal when the stream
	// is read instead of by a coroutine of its own: the SDK resumes every
	// coroutine of a workflow on each pass of each workflow task, so the
	// coroutine costs every task (and every replay) a resume even when
	// nothing is published. The stream is read by workflow code (Sync,
	// Publish, PublishLazy, Offset, Truncate, Settle, Drain, State), by a
	// poll, and by the read and offset queries: every one of them reads
	// the batches that have arrived first, so a batch takes its offset
	// after the items workflow code published before it arrived and
	// before those it publishes after, whichever read comes first (a
	// query's read is one workflow code cannot tell from its own next
	// one, and replay, which has no queries, lays out the same log).
	// Accept may therefore run while a query is answered: it must not
	// block or start anything (GetVersion is fine: its marker may land
	// anywhere). A workflow that changes this for runs in flight gates it
	// by a version. Zero value: a coroutine.
	ReadOnDemand bool
}

func (o Options) withDefaults() Options {
	if o.MaxItems <= 0 {
		o.MaxItems = 4096
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 20
	}
	if o.CarryBytes <= 0 {
		o.CarryBytes = 256 << 10
	}
	if o.ReadWindow <= 0 {
		o.ReadWindow = time.Minute
	}
	if o.PublisherTTL <= 0 {
		o.PublisherTTL = 15 * time.Minute
	}
	return o
}

// Stream is the workflow side of a workflow stream: an append-only log of
// items with offsets, published to by workflow code (Publish, no event)
// and by signal (PublishInput), read by poll updates. Its state is
// workflow state: replay rebuilds the same log, with the same offsets,
// from the same history. Use it from workflow code only.
type Stream struct {
	opts     Options
	log      []WireItem // offsets are base + index
	bytes    int
	base     int64
	seqs     map[string]int64
	seen     map[string]float64
	draining bool
	polls    int           // poll handlers still open
	parked   map[int]int64 // waiting polls: the offset each waits for
	nextPoll int           // ids of parked
	marks    []readMark    // recent polls: what their subscribers had read
	// lazy are the values of PublishLazy's items not encoded yet: lazy[i]
	// is log[i]'s, nil for an item encoded already (len(lazy) <=
	// len(log)).
	lazy []any
	ch   workflow.ReceiveChannel
	now  func() time.Time
}

// readMark says a subscriber had read every item before offset upTo at
// workflow time at.
type readMark struct {
	at   time.Time
	upTo int64
}

// New registers the stream's handlers on the workflow (call it before
// the workflow's first blocking call) and returns it, holding prior (a
// continued run's State) when there is one.
func New(ctx workflow.Context, prior *State, opts Options) (*Stream, error) {
	s := &Stream{opts: opts.withDefaults(), seqs: map[string]int64{}, seen: map[string]float64{}, parked: map[int]int64{},
		now: func() time.Time { return workflow.Now(ctx) }}
	if prior != nil {
		for i, it := range prior.Log {
			s.log = append(s.log, WireItem{Topic: it.Topic, Data: it.Data, Offset: prior.BaseOffset + int64(i)})
			s.bytes += itemSize(it)
		}
		s.base = prior.BaseOffset
		for _, r := range prior.Readers {
			sec, frac := math.Modf(r.At)
			s.marks = append(s.marks, readMark{at: time.Unix(int64(sec), int64(frac*1e9)), upTo: r.UpTo})
		}
		maps.Copy(s.seqs, prior.PublisherSeqs)
		maps.Copy(s.seen, prior.PublisherLastSeen)
	}
	ch := workflow.GetSignalChannel(ctx, PublishSignal)
	s.ch = ch
	if opts.ReadOnDemand {
		return s, s.register(ctx)
	}
	// The coroutine waits for batches without receiving: a coroutine
	// blocked in Receive is handed an arriving signal directly, where the
	// main coroutine's Sync cannot see it, and a piece could then come
	// after the item Sync was called to follow.
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return ch.Len() > 0 }); err != nil {
				return
			}
			s.Sync()
		}
	})
	return s, s.register(ctx)
}

// register sets the stream's poll update, offset query and read query
// handlers (a query handler issues no command: registering one is
// replay-safe, and a run that registers it has the same history).
func (s *Stream) register(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, PollUpdate, s.onPoll, workflow.UpdateHandlerOptions{
		Validator: func(in PollInput) error {
			if s.draining {
				return temporal.NewNonRetryableApplicationError("the run is draining its stream for continue-as-new (poll again)", ErrStreamDraining, nil)
			}
			if in.FromOffset < 0 {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf("from_offset %d is negative", in.FromOffset), "BadPoll", nil)
			}
			return nil
		},
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, OffsetQuery, func() (int64, error) { return s.Offset(), nil }); err != nil {
		return err
	}
	return workflow.SetQueryHandler(ctx, ReadQuery, s.onRead)
}

// syncOnDemand reads the batches that have arrived, with ReadOnDemand
// (without it the coroutine has read them by the end of the pass).
func (s *Stream) syncOnDemand() {
	if s.opts.ReadOnDemand {
		s.Sync()
	}
}

// Sync appends the batches published by signal that have arrived but not
// been appended yet. Signals are read by a coroutine of their own, which
// runs after the workflow's main coroutine in a workflow task (or, with
// ReadOnDemand, when the stream is read): call Sync before publishing
// what must come after them (an activity's pieces, signalled before it
// completed, before the workflow's item about its result).
func (s *Stream) Sync() {
	for {
		var in PublishInput
		if !s.ch.ReceiveAsync(&in) {
			return
		}
		s.onPublish(in)
	}
}

// Offset is the next item's offset (with ReadOnDemand, after the batches
// that have arrived).
func (s *Stream) Offset() int64 {
	s.syncOnDemand()
	return s.next()
}

// next is the next item's offset, reading nothing.
func (s *Stream) next() int64 { return s.base + int64(len(s.log)) }

// Publish appends value to topic, encoded by the default payload
// converter. It adds no history event: replay publishes it again, at the
// same offset.
func (s *Stream) Publish(topic string, value any) error {
	data, err := Encode(value)
	if err != nil {
		return err
	}
	s.syncOnDemand()
	s.append(WireItem{Topic: topic, Data: data})
	return nil
}

// PublishLazy is Publish for a value the default converter can encode
// (JSON): it is encoded only when a subscriber polls (or the stream is
// handed over), so a stream nobody reads costs no encoding, on replay
// either. Offsets and truncation are what Publish gives. A value that
// then fails to encode is published as {"error": "..."}.
func (s *Stream) PublishLazy(topic string, value any) {
	if value == nil { // nothing to put off: a nil value is encoded now
		_ = s.Publish(topic, nil)
		return
	}
	s.syncOnDemand()
	s.log = append(s.log, WireItem{Topic: topic, Offset: s.next()})
	for len(s.lazy) < len(s.log)-1 {
		s.lazy = append(s.lazy, nil)
	}
	s.lazy = append(s.lazy, value)
	for len(s.log) > 1 && len(s.log) > s.opts.MaxItems {
		s.drop(1)
	}
}

// encodeLazy encodes the items PublishLazy left, then truncates by
// MaxBytes: what eager encoding would have kept (the newest items within
// both bounds).
func (s *Stream) encodeLazy() {
	if len(s.lazy) == 0 {
		return
	}
	for i, v := range s.lazy {
		if v == nil {
			continue
		}
		s.log[i].Data = encodeValue(v)
		s.bytes += itemSize(s.log[i])
	}
	s.lazy = nil
	for len(s.log) > 1 && s.bytes > s.opts.MaxBytes {
		s.drop(1)
	}
}

func itemSize(it WireItem) int { return len(it.Data) + len(it.Topic) }

func (s *Stream) append(it WireItem) {
	it.Offset = s.next()
	s.log = append(s.log, it)
	s.bytes += itemSize(it)
	for len(s.log) > 1 && (len(s.log) > s.opts.MaxItems || s.bytes > s.opts.MaxBytes) {
		s.drop(1)
	}
}

func (s *Stream) drop(n int) {
	for i, it := range s.log[:n] {
		if i < len(s.lazy) && s.lazy[i] != nil {
			continue // never encoded, never counted
		}
		s.bytes -= itemSize(it)
	}
	s.log = append(s.log[:0:0], s.log[n:]...)
	s.lazy = append(s.lazy[:0:0], s.lazy[min(n, len(s.lazy)):]...)
	s.base += int64(n)
}

// Truncate discards the items before offset upTo (subscribers asking for
// them get TruncatedOffset).
func (s *Stream) Truncate(upTo int64) error {
	s.syncOnDemand()
	s.encodeLazy()
	n := upTo - s.base
	if n <= 0 {
		return nil
	}
	if n > int64(len(s.log)) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cannot truncate to offset %d: only %d items exist", upTo, s.next()), ErrTruncateOutOfRange, nil)
	}
	s.drop(int(n))
	return nil
}

func (s *Stream) onPublish(in PublishInput) {
	if in.PublisherID != "" && in.Sequence <= s.seqs[in.PublisherID] {
		return // a retried batch already appended
	}
	if s.opts.Accept != nil && !s.opts.Accept(in) {
		return
	}
	if in.PublisherID != "" {
		s.seqs[in.PublisherID] = in.Sequence
		s.seen[in.PublisherID] = float64(s.now().Unix())
	}
	for _, e := range in.Items {
		s.append(WireItem{Topic: e.Topic, Data: e.Data})
	}
}

func (s *Stream) truncated(from int64) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("offset %d has been truncated; the oldest kept is %d", from, s.base), ErrTruncatedOffset, nil)
}

// mark remembers that a subscriber had read everything before upTo, and
// forgets marks older than ReadWindow.
func (s *Stream) mark(upTo int64) {
	now := s.now()
	i := 0
	for i < len(s.marks) && now.Sub(s.marks[i].at) > s.opts.ReadWindow {
		i++
	}
	s.marks = append(s.marks[i:], readMark{at: now, upTo: upTo})
}

func (s *Stream) onPoll(ctx workflow.Context, in PollInput) (PollResult, error) {
	s.polls++
	defer func() { s.polls-- }()
	s.syncOnDemand()
	s.encodeLazy()
	s.mark(max(in.FromOffset, s.base))
	if in.FromOffset != 0 && in.FromOffset < s.base {
		return PollResult{}, s.truncated(in.FromOffset)
	}
	id := s.nextPoll
	s.nextPoll++
	s.parked[id] = max(in.FromOffset, s.base)
	ready := func() bool {
		return s.draining || (in.FromOffset != 0 && in.FromOffset < s.base) ||
			int64(len(s.log)) > max(in.FromOffset-s.base, 0)
	}
	err := s.await(ctx, ready)
	delete(s.parked, id)
	if err != nil {
		return PollResult{}, err
	}
	s.encodeLazy()
	from := in.FromOffset - s.base
	if from < 0 {
		if in.FromOffset != 0 {
			return PollResult{}, s.truncated(in.FromOffset)
		}
		from = 0
	}
	return s.answer(int(min(from, int64(len(s.log)))), in.Topics, func(i int) WireItem { return s.log[i] }), nil
}

// answer is a read's answer from s.log[from:] on topics (none: all), each
// item as item(i) gives it: at most MaxPollBytes, at least one item.
func (s *Stream) answer(from int, topics []string, item func(i int) WireItem) PollResult {
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	res := PollResult{Items: []WireItem{}, NextOffset: s.next()}
	size := 0
	for i := from; i < len(s.log); i++ {
		if len(want) > 0 && !want[s.log[i].Topic] {
			continue
		}
		it := item(i)
		if n := itemSize(it); size+n > MaxPollBytes && len(res.Items) > 0 {
			res.NextOffset, res.MoreReady = it.Offset, true
			break
		} else {
			size += n
		}
		res.Items = append(res.Items, it)
	}
	return res
}

// onRead answers the read query: what a poll from in.FromOffset would
// answer now, without waiting and without changing the log (an item
// PublishLazy left is encoded for the answer only; with ReadOnDemand the
// batches that have arrived are read first, as any read reads them). It
// answers every input: from an offset truncated (or a negative one) it
// reads from the oldest item kept, which BaseOffset gives.
func (s *Stream) onRead(in PollInput) (ReadResult, error) {
	s.syncOnDemand()
	if in.FromOffset > s.next() { // from an offset not reached yet: nothing
		return ReadResult{Items: []WireItem{}, NextOffset: in.FromOffset, BaseOffset: s.base, Draining: s.draining}, nil
	}
	from := max(in.FromOffset-s.base, 0)
	from = min(from, int64(len(s.log)))
	res := s.answer(int(from), in.Topics, s.encoded)
	return ReadResult{Items: res.Items, NextOffset: res.NextOffset, MoreReady: res.MoreReady, BaseOffset: s.base, Draining: s.draining}, nil
}

// encoded is s.log[i] with its data, encoding a value PublishLazy left
// (without keeping the encoding: the log stays as workflow code left it).
func (s *Stream) encoded(i int) WireItem {
	it := s.log[i]
	if i < len(s.lazy) && s.lazy[i] != nil {
		it.Data = encodeValue(s.lazy[i])
	}
	return it
}

// encodeValue is a lazy value's wire data: {"error": "..."} for a value
// that fails to encode.
func encodeValue(v any) string {
	data, err := Encode(v)
	if err != nil {
		data, _ = Encode(map[string]string{"error": err.Error()})
	}
	return data
}

// await waits until ready; with ReadOnDemand it reads the batches that
// arrive meanwhile, as the coroutine would.
func (s *Stream) await(ctx workflow.Context, ready func() bool) error {
	if !s.opts.ReadOnDemand {
		return workflow.Await(ctx, ready)
	}
	for {
		s.Sync()
		if ready() {
			return nil
		}
		if err := workflow.Await(ctx, func() bool { return ready() || s.ch.Len() > 0 }); err != nil {
			return err
		}
	}
}

// Settle waits, up to grace, until the subscribers have read the last
// item: until every poll waiting asks for what comes after it, or no
// subscriber polled within ReadWindow. Call it before Drain when the run
// is about to close (not continue as new), so that a subscriber between
// two polls reads the last items before the run is gone. It waits (with a
// timer, which adds events) only when there were subscribers and they had
// not caught up.
func (s *Stream) Settle(ctx workflow.Context, grace time.Duration) error {
	caughtUp := func() bool {
		now, recent := s.now(), false
		for _, m := range s.marks {
			recent = recent || now.Sub(m.at) <= s.opts.ReadWindow
		}
		if !recent {
			return true
		}
		if len(s.parked) == 0 {
			return false
		}
		for _, from := range s.parked {
			if from < s.next() {
				return false
			}
		}
		return true
	}
	if s.opts.ReadOnDemand {
		s.Sync()
	}
	if caughtUp() {
		return nil
	}
	_, err := workflow.AwaitWithTimeout(ctx, grace, caughtUp)
	return err
}

// Drain hands the stream over: polls are refused from now on
// (StreamDraining: their subscribers poll again and land on the next run),
// open polls answer what they have, and Drain returns once they have. Call
// it before continue-as-new, and before the run returns, so that open
// subscribers read every item.
func (s *Stream) Drain(ctx workflow.Context) error {
	if s.opts.ReadOnDemand {
		s.Sync()
	}
	s.draining = true
	return workflow.Await(ctx, func() bool { return s.polls == 0 })
}

// Draining reports whether Drain was called.
func (s *Stream) Draining() bool { return s.draining }

// State is what the next run needs, after Drain: the items not yet read
// by every subscriber that polled within ReadWindow (none when no
// subscriber did), at most CarryBytes of the newest, and the publishers
// seen within PublisherTTL. Offsets go on from the same number either way.
// The run's own log is left whole (the read query on the closed run reads
// what its readers by query had not: they are not among the subscribers
// counted, and a run they read from carries no items for them), and only
// the items that go on are encoded.
func (s *Stream) State() (*State, error) {
	if !s.draining {
		return nil, errors.New("streams: State before Drain")
	}
	if s.opts.ReadOnDemand {
		s.Sync()
	}
	now := s.now()
	read := int64(-1)
	for _, m := range s.marks {
		if now.Sub(m.at) <= s.opts.ReadWindow && (read < 0 || m.upTo < read) {
			read = m.upTo
		}
	}
	if read < 0 { // nobody reads: carry no items
		read = s.next()
	}
	// The first item not read:
	first := int(min(max(read-s.base, 0), int64(len(s.log))))
	var keep []WireItem // newest first (encoded)
	for i, size := len(s.log)-1, 0; i >= first; i-- {
		it := s.encoded(i)
		if size += itemSize(it); size > min(s.opts.CarryBytes, s.opts.MaxBytes) {
			break
		}
		keep = append(keep, it)
	}
	st := &State{Log: make([]WireItem, len(keep)), BaseOffset: s.next() - int64(len(keep)),
		PublisherSeqs: map[string]int64{}, PublisherLastSeen: map[string]float64{}}
	for i, it := range keep {
		st.Log[len(keep)-1-i] = WireItem{Topic: it.Topic, Data: it.Data}
	}
	for _, m := range s.marks {
		if now.Sub(m.at) <= s.opts.ReadWindow {
			st.Readers = append(st.Readers, Reader{At: float64(m.at.UnixNano()) / 1e9, UpTo: m.upTo})
		}
	}
	secs := float64(now.Unix())
	for id, seq := range s.seqs {
		if last := s.seen[id]; secs-last < s.opts.PublisherTTL.Seconds() {
			st.PublisherSeqs[id], st.PublisherLastSeen[id] = seq, last
		}
	}
	return st, nil
}
