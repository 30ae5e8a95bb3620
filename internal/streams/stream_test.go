package streams

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// harnessInput is what the test workflow does: start a stream (from
// Prior), publish Publish from workflow code, wait for "finish", then
// drain and return the stream's State.
type harnessInput struct {
	Prior   *State
	Opts    Options
	Publish []string // "topic=value"
	Lazy    bool     // PublishLazy rather than Publish
}

// onDemand runs the harness's streams with ReadOnDemand
// (TestReadOnDemand).
var onDemand bool

func harnessWorkflow(ctx workflow.Context, in harnessInput) (*State, error) {
	in.Opts.ReadOnDemand = in.Opts.ReadOnDemand || onDemand
	s, err := New(ctx, in.Prior, in.Opts)
	if err != nil {
		return nil, err
	}
	for _, p := range in.Publish {
		topic, value, _ := strings.Cut(p, "=")
		if in.Lazy {
			s.PublishLazy(topic, value)
		} else if err := s.Publish(topic, value); err != nil {
			return nil, err
		}
	}
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	s.Sync()
	if err := s.Drain(ctx); err != nil {
		return nil, err
	}
	return s.State()
}

// outcome is one poll's answer or refusal, as the test saw it.
type outcome struct {
	res      PollResult
	err      error
	rejected bool
	done     bool
	at       time.Time // the test environment's clock when it completed
}

type harness struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	polls []*outcome
}

func newHarness(t *testing.T) *harness {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(harnessWorkflow)
	return &harness{t: t, env: env}
}

// poll sends a poll update at delay; its outcome fills in as it happens.
func (h *harness) poll(delay time.Duration, in PollInput) *outcome {
	o := &outcome{}
	h.polls = append(h.polls, o)
	id := fmt.Sprintf("poll-%d", len(h.polls))
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(PollUpdate, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { o.err, o.rejected, o.done = err, true, true },
			OnComplete: func(v any, err error) {
				o.done, o.err, o.at = true, err, h.env.Now()
				if err == nil {
					o.res = v.(PollResult)
				}
			},
		}, in)
	}, delay)
	return o
}

func (h *harness) signal(delay time.Duration, name string, arg any) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(name, arg) }, delay)
}

func (h *harness) run(in harnessInput, finishAt time.Duration) *State {
	h.signal(finishAt, "finish", nil)
	h.env.ExecuteWorkflow(harnessWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var st *State
	require.NoError(h.t, h.env.GetWorkflowResult(&st))
	return st
}

func values(t *testing.T, items []WireItem) []string {
	var out []string
	for _, it := range items {
		var v string
		require.NoError(t, Decode(it.Data, &v))
		out = append(out, fmt.Sprintf("%d:%s=%s", it.Offset, it.Topic, v))
	}
	return out
}

// withOffsets gives a State's items their offsets.
func withOffsets(st *State) []WireItem {
	out := make([]WireItem, len(st.Log))
	for i, it := range st.Log {
		out[i] = WireItem{Topic: it.Topic, Data: it.Data, Offset: st.BaseOffset + int64(i)}
	}
	return out
}

func entry(t *testing.T, topic, value string) PublishEntry {
	data, err := Encode(value)
	require.NoError(t, err)
	return PublishEntry{Topic: topic, Data: data}
}

func errType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

// TestReadOnDemand runs the harness's tests again with a stream that has
// no coroutine: it reads its signals when it is read.
func TestReadOnDemand(t *testing.T) {
	onDemand = true
	defer func() { onDemand = false }()
	for name, test := range map[string]func(*testing.T){
		"PollReadsWhatWasPublished":          TestPollReadsWhatWasPublished,
		"PublisherDeduplication":             TestPublisherDeduplication,
		"Truncation":                         TestTruncation,
		"PollAnswerIsBounded":                TestPollAnswerIsBounded,
		"DrainAnswersOpenPollsAndRefusesNew": TestDrainAnswersOpenPollsAndRefusesNewOnes,
		"StateCarriesWhatReadersHaveNotRead": TestStateCarriesWhatReadersHaveNotRead,
		"PublishedWhileParkedWakesThePoll":   testPublishedWhileParked,
	} {
		t.Run(name, test)
	}
}

// testPublishedWhileParked: a poll parked before anything is published
// by signal is answered by the batch when it arrives, not at the
// workflow's next Sync.
func testPublishedWhileParked(t *testing.T) {
	h := newHarness(t)
	start := h.env.Now()
	parked := h.poll(time.Second, PollInput{})
	h.signal(2*time.Second, PublishSignal, PublishInput{Items: []PublishEntry{entry(t, "t", "late")}, PublisherID: "p", Sequence: 1})
	h.run(harnessInput{}, 5*time.Second)
	require.True(t, parked.done)
	require.NoError(t, parked.err)
	assert.Equal(t, []string{"0:t=late"}, values(t, parked.res.Items))
	assert.Less(t, parked.at.Sub(start), 3*time.Second, "answered when the batch arrived (2s), not at the finish (5s)")
}

func TestPollReadsWhatWasPublished(t *testing.T) {
	h := newHarness(t)
	all := h.poll(time.Second, PollInput{})
	text := h.poll(time.Second, PollInput{Topics: []string{"text"}, FromOffset: 1})
	waiting := h.poll(time.Second, PollInput{FromOffset: 3}) // parks until offset 3 exists
	h.signal(2*time.Second, PublishSignal, PublishInput{Items: []PublishEntry{entry(t, "text", "c")}, PublisherID: "p", Sequence: 1})
	h.run(harnessInput{Publish: []string{"calls=a", "text=b", "calls=x"}}, 3*time.Second)

	require.NoError(t, all.err)
	assert.Equal(t, []string{"0:calls=a", "1:text=b", "2:calls=x"}, values(t, all.res.Items))
	assert.Equal(t, int64(3), all.res.NextOffset)
	assert.Equal(t, []string{"1:text=b"}, values(t, text.res.Items))
	assert.Equal(t, int64(3), text.res.NextOffset, "next_offset is past every item, read or filtered")
	require.True(t, waiting.done)
	assert.Equal(t, []string{"3:text=c"}, values(t, waiting.res.Items))
	assert.False(t, all.res.MoreReady)
}

func TestPublisherDeduplication(t *testing.T) {
	h := newHarness(t)
	batch := func(id string, seq int64, v string) PublishInput {
		return PublishInput{Items: []PublishEntry{entry(t, "t", v)}, PublisherID: id, Sequence: seq}
	}
	h.signal(time.Second, PublishSignal, batch("p", 1, "one"))
	h.signal(2*time.Second, PublishSignal, batch("p", 1, "one again")) // a retried batch: dropped
	h.signal(3*time.Second, PublishSignal, batch("q", 1, "other publisher"))
	h.signal(4*time.Second, PublishSignal, batch("p", 2, "two"))
	h.signal(5*time.Second, PublishSignal, batch("", 0, "anonymous"))
	h.signal(6*time.Second, PublishSignal, batch("", 0, "anonymous"))
	got := h.poll(7*time.Second, PollInput{})
	st := h.run(harnessInput{}, 8*time.Second)

	assert.Equal(t, []string{"0:t=one", "1:t=other publisher", "2:t=two", "3:t=anonymous", "4:t=anonymous"}, values(t, got.res.Items))
	assert.Equal(t, map[string]int64{"p": 2, "q": 1}, st.PublisherSeqs, "the sequences go to the next run")

	// The next run keeps the offsets and still drops p's old sequences.
	h = newHarness(t)
	h.signal(time.Second, PublishSignal, batch("p", 2, "two again"))
	h.signal(2*time.Second, PublishSignal, batch("p", 3, "three"))
	next := h.poll(3*time.Second, PollInput{FromOffset: st.BaseOffset})
	h.run(harnessInput{Prior: st}, 4*time.Second)
	assert.Equal(t, []string{"5:t=three"}[0], values(t, next.res.Items)[len(next.res.Items)-1])
	for _, v := range values(t, next.res.Items) {
		assert.NotContains(t, v, "two again")
	}
}

func TestTruncation(t *testing.T) {
	h := newHarness(t)
	old := h.poll(time.Second, PollInput{FromOffset: 1})
	oldest := h.poll(time.Second, PollInput{})
	negative := h.poll(time.Second, PollInput{FromOffset: -1})
	h.run(harnessInput{Opts: Options{MaxItems: 3}, Publish: []string{"t=0", "t=1", "t=2", "t=3", "t=4"}}, 2*time.Second)

	assert.Equal(t, ErrTruncatedOffset, errType(old.err), "%v", old.err)
	assert.Equal(t, []string{"2:t=2", "3:t=3", "4:t=4"}, values(t, oldest.res.Items), "offset 0 is the oldest kept")
	assert.True(t, negative.rejected, "a negative offset is refused by the validator (no event)")
}

func TestPollAnswerIsBounded(t *testing.T) {
	h := newHarness(t)
	big := strings.Repeat("x", 300_000)
	got := h.poll(time.Second, PollInput{})
	pub := make([]string, 5)
	for i := range pub {
		pub[i] = "t=" + big
	}
	h.run(harnessInput{Opts: Options{MaxBytes: 4 << 20}, Publish: pub}, 2*time.Second)

	require.NoError(t, got.err)
	assert.True(t, got.res.MoreReady)
	assert.Less(t, len(got.res.Items), 5)
	assert.Equal(t, int64(len(got.res.Items)), got.res.NextOffset, "next_offset is the first item left out")
	size := 0
	for _, it := range got.res.Items {
		size += itemSize(it)
	}
	assert.LessOrEqual(t, size, MaxPollBytes)
}

func TestDrainAnswersOpenPollsAndRefusesNewOnes(t *testing.T) {
	h := newHarness(t)
	open := h.poll(time.Second, PollInput{FromOffset: 2}) // nothing at 2: parked until the drain
	st := h.run(harnessInput{Publish: []string{"t=a", "t=b"}}, 2*time.Second)

	require.True(t, open.done)
	require.NoError(t, open.err)
	assert.Empty(t, open.res.Items, "a poll open at the drain answers what there is")
	assert.Equal(t, int64(2), open.res.NextOffset)
	assert.Equal(t, int64(2), st.BaseOffset, "the open poll's reader had read 0 and 1: they stay behind")
	assert.Empty(t, st.Log)
}

func TestStateCarriesWhatReadersHaveNotRead(t *testing.T) {
	h := newHarness(t)
	h.poll(time.Second, PollInput{FromOffset: 3}) // a reader has read 0..2
	st := h.run(harnessInput{Publish: []string{"t=0", "t=1", "t=2", "t=3", "t=4"}}, 2*time.Second)
	assert.Equal(t, int64(3), st.BaseOffset, "items every recent reader has read stay behind")
	assert.Len(t, st.Log, 2)
	require.Len(t, st.Readers, 1)
	assert.Equal(t, int64(3), st.Readers[0].UpTo)

	// Nobody reads: no items go on, and offsets go on from 5.
	h = newHarness(t)
	st = h.run(harnessInput{Publish: []string{"t=0", "t=1", "t=2", "t=3", "t=4"}}, time.Second)
	assert.Equal(t, int64(5), st.BaseOffset)
	assert.Empty(t, st.Log)

	// CarryBytes keeps only the newest of what a reader has not read.
	one, err := Encode("0")
	require.NoError(t, err)
	h = newHarness(t)
	h.poll(500*time.Millisecond, PollInput{}) // a reader, at the start
	st = h.run(harnessInput{Opts: Options{CarryBytes: 2*(len(one)+1) + 1}, Publish: []string{"t=0", "t=1", "t=2", "t=3", "t=4"}}, time.Second)
	assert.Equal(t, int64(3), st.BaseOffset)
	assert.Equal(t, []string{"3:t=3", "4:t=4"}, values(t, withOffsets(st)))
}

func TestValidatorRefusesPollsWhileDraining(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	wf := func(ctx workflow.Context) error {
		s, err := New(ctx, nil, Options{})
		if err != nil {
			return err
		}
		if err := s.Drain(ctx); err != nil {
			return err
		}
		return workflow.Sleep(ctx, time.Minute) // still open, draining
	}
	env.RegisterWorkflow(wf)
	var refused error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(PollUpdate, "p", &testsuite.TestUpdateCallback{
			OnAccept:   func() { t.Error("a poll was accepted while draining") },
			OnReject:   func(err error) { refused = err },
			OnComplete: func(any, error) {},
		}, PollInput{})
	}, time.Second)
	env.ExecuteWorkflow(wf)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, ErrStreamDraining, errType(refused), "%v", refused)
}

func TestEncodeRoundTrip(t *testing.T) {
	data, err := Encode(map[string]any{"a": 1})
	require.NoError(t, err)
	var v map[string]int
	require.NoError(t, Decode(data, &v))
	assert.Equal(t, map[string]int{"a": 1}, v)
	p, err := DecodePayload(data)
	require.NoError(t, err)
	assert.Equal(t, "json/plain", string(p.Metadata["encoding"]))
	_, err = DecodePayload("not base64!")
	assert.Error(t, err)
}

// PublishLazy keeps what Publish keeps: the same items at the same
// offsets, truncated by count and by bytes alike, polled and handed over.
func TestPublishLazyIsPublish(t *testing.T) {
	var pub []string
	for i := range 40 {
		pub = append(pub, fmt.Sprintf("t=%s", strings.Repeat(fmt.Sprint(i%10), 10+i*7)))
	}
	run := func(lazy bool) ([]string, []string, *State) {
		h := newHarness(t)
		early := h.poll(time.Second, PollInput{})
		late := h.poll(time.Second, PollInput{FromOffset: 38})
		st := h.run(harnessInput{Opts: Options{MaxItems: 25, MaxBytes: 6000, CarryBytes: 1 << 20}, Publish: pub, Lazy: lazy}, 2*time.Second)
		require.NoError(t, early.err)
		require.NoError(t, late.err)
		return values(t, early.res.Items), values(t, late.res.Items), st
	}
	e1, l1, s1 := run(false)
	e2, l2, s2 := run(true)
	assert.NotEmpty(t, e1)
	assert.Less(t, len(e1), 25, "truncated by bytes")
	assert.Equal(t, e1, e2)
	assert.Equal(t, l1, l2)
	for _, st := range []*State{s1, s2} { // the test clock starts at the wall clock
		for i := range st.Readers {
			st.Readers[i].At = 0
		}
	}
	assert.Equal(t, s1, s2)
}

// The read query answers what a poll would, at once, without changing the
// log: lazy items encoded for the answer only, a truncated offset read
// from the oldest kept (BaseOffset), an offset not reached answered empty
// at that offset, batches signalled with ReadOnDemand read first, and,
// after Drain and State (which carries nothing: no reader polled), the
// whole log still readable.
func TestReadQuery(t *testing.T) {
	for _, demand := range []bool{false, true} {
		t.Run(fmt.Sprint("ReadOnDemand=", demand), func(t *testing.T) {
			h := newHarness(t)
			read := func(in PollInput) ReadResult {
				v, err := h.env.QueryWorkflow(ReadQuery, in)
				require.NoError(t, err)
				var res ReadResult
				require.NoError(t, v.Get(&res))
				return res
			}
			var early, signalled, late, future ReadResult
			h.env.RegisterDelayedCallback(func() {
				early = read(PollInput{Topics: []string{"b"}})
				future = read(PollInput{FromOffset: 9})
			}, time.Second)
			h.signal(2*time.Second, PublishSignal, PublishInput{PublisherID: "p", Sequence: 1, Items: []PublishEntry{entry(t, "c", "z")}})
			h.env.RegisterDelayedCallback(func() { signalled = read(PollInput{FromOffset: 0}) }, 3*time.Second)
			h.env.RegisterDelayedCallback(func() {}, 5*time.Second)
			st := h.run(harnessInput{Opts: Options{MaxItems: 2, ReadOnDemand: demand}, Lazy: true, Publish: []string{"a=x", "b=y", "a=w"}}, 4*time.Second)
			late = read(PollInput{FromOffset: 1})
			assert.Equal(t, []string{"1:b=y"}, values(t, early.Items), "topics; lazy items encoded")
			assert.Equal(t, int64(1), early.BaseOffset, "MaxItems 2: offset 0 is gone")
			assert.Equal(t, int64(3), early.NextOffset)
			assert.Empty(t, future.Items)
			assert.Equal(t, int64(9), future.NextOffset, "an offset not reached: nothing, at it")
			assert.Equal(t, []string{"2:a=w", "3:c=z"}, values(t, signalled.Items), "the signalled batch is read")
			assert.False(t, signalled.Draining)
			assert.Empty(t, st.Log, "no reader polled: nothing carried")
			assert.Equal(t, int64(4), st.BaseOffset)
			assert.True(t, late.Draining)
			assert.Equal(t, []string{"2:a=w", "3:c=z"}, values(t, late.Items), "the closed run's log is whole")
		})
	}
}
