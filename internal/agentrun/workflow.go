package agentrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/intercept"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/streams"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// DefaultModelTimeout is the zero value of Config.ModelTimeout: one model
// call's attempt may stream a long answer for this long.
const DefaultModelTimeout = 10 * time.Minute

// Config is what the worker gives the workflow: its tools and hooks.
type Config struct {
	// Tools the model may call, in the order shown to it.
	Tools []*activities.Tool
	// Hooks by name.
	Hooks map[string]hooks.Hook
	// Toolsets names the worker's toolsets (activities.Toolset): a run
	// reads their tools once, by ListToolsActivity, and records that it
	// does (a side effect), so it replays on any worker.
	Toolsets []string
	// CustomCheckpointer: the worker's Checkpointer is not the Temporal
	// default, so checkpoints are saved by an activity.
	CustomCheckpointer bool
	// PayloadLimit is the largest payload the run writes (its result, its
	// continue-as-new input); past it the run fails with
	// ErrPayloadTooLarge instead of a workflow task that fails forever.
	// Zero value: DefaultPayloadLimit. Negative: no limit (the client
	// stores large payloads externally). A positive value is at least
	// MinPayloadLimit.
	PayloadLimit int
	// ModelHeartbeatTimeout is the model activity's heartbeat timeout
	// (tulip heartbeats while the model answers): how soon a model call a
	// dead worker held is retried. Zero value:
	// activities.DefaultHeartbeatTimeout. Negative: none.
	ModelHeartbeatTimeout time.Duration
	// ModelTimeout bounds one attempt of a model call. Zero value:
	// DefaultModelTimeout.
	ModelTimeout time.Duration
	// Observer receives each tool-call decision and model call once (never
	// during replay, and once per worker; see observe.go). Zero value: none; metrics go to the SDK's metrics
	// handler either way.
	Observer Observer
	// MetricAgents lists the agents whose names tag the worker's metrics;
	// any other agent is tagged OtherTag. Nil: the first
	// DefaultMetricAgentLimit distinct names the worker sees, then
	// OtherTag (a label's values must be bounded: RunInput.Agent is any
	// client's string). Spans and the Observer get the name either way.
	MetricAgents []string

	emitted *emitted   // what this worker emitted (observe.go)
	agents  *agentTags // the agent tag's bound (observe.go)
}

// DefaultPayloadLimit is a little under Temporal's default 2 MiB blob limit.
const DefaultPayloadLimit = 2<<20 - 64<<10

// Func is the agent-run workflow function. Its first argument is RunInput
// as JSON, decoded strictly: an unknown field fails the run with
// protocol.ErrBadInput. The others are the segments of a
// continue-as-new (see Carry): clients pass only the first. The input
// comes by pointer so that the run can let go of it once decoded (the
// SDK's reflective call holds its arguments for as long as the run
// lives, in a worker's cache too).
// Its result is a RunResult's JSON payload (activities.JSONPayload); while
// a run replays, a JSON null where no check needs the result
// (resultUnsent).
type Func = func(ctx wf.Context, in *json.RawMessage,
	s1, s2, s3, s4, s5, s6, s7, s8 []byte) (converter.RawValue, error)

// New returns the agent-run workflow function for cfg. Register it under
// WorkflowName.
func New(cfg Config) (Func, error) {
	if cfg.PayloadLimit > 0 && cfg.PayloadLimit < MinPayloadLimit {
		return nil, fmt.Errorf("tulip: PayloadLimit %d is below the minimum %d (use -1 for no limit)", cfg.PayloadLimit, MinPayloadLimit)
	}
	cfg.emitted = newEmitted()
	cfg.agents = newAgentTags(cfg.MetricAgents)
	tools := make(map[string]*activities.Tool, len(cfg.Tools))
	names := make([]string, 0, len(cfg.Tools))
	for _, t := range cfg.Tools {
		if t == nil {
			return nil, errors.New("tulip: nil tool")
		}
		tools[t.Spec().Name] = t
		names = append(names, t.Spec().Name)
	}
	if _, err := activities.NewToolNames(names...); err != nil {
		return nil, fmt.Errorf("tulip: %w", err)
	}
	// The run: its input, its set-up, its turns (loop), its result. The
	// function is small and calls the loop itself: while a workflow
	// waits, each time it yields, the SDK walks its stack (up to 20
	// frames, looking each function up), and a frame costs more the
	// larger its function.
	return func(ctx wf.Context, in *json.RawMessage, s1, s2, s3, s4, s5, s6, s7, s8 []byte) (converter.RawValue, error) {
		r := &run{cfg: &cfg, tools: tools, interruptState: interruptState{answered: map[string]bool{}}}
		if err := r.accept(ctx, in, [][]byte{s1, s2, s3, s4, s5, s6, s7, s8}); err != nil {
			return converter.RawValue{}, err
		}
		if err := r.setUp(ctx); err != nil {
			return converter.RawValue{}, err
		}
		if err := r.loop(ctx); err != nil {
			if !wf.IsContinueAsNewError(err) {
				err = r.fail(ctx, err)
			}
			return converter.RawValue{}, err
		}
		if err := r.complete(ctx); err != nil {
			return converter.RawValue{}, err
		}
		if r.result == nil { // still replaying: never sent (resultUnsent)
			return r.unsent(), nil
		}
		return activities.JSONPayload(r.result), nil
	}, nil
}

// accept takes the run's input, or refuses it. segs are the carry's
// segments, from the workflow's arguments.
func (r *run) accept(ctx wf.Context, in *json.RawMessage, segs [][]byte) error {
	var raw json.RawMessage
	if in != nil {
		raw, *in = *in, nil
	}
	// Registered first: a run refused before it had its thread's state
	// answers that it left none (the next run's loader asks).
	if err := wf.SetQueryHandler(ctx, QueryThread, r.threadState); err != nil {
		return err
	}
	if err := decodeStrict("run input", raw, &r.in); err != nil {
		return r.refuse(ctx, err)
	}
	if c := r.in.Continued; c != nil {
		n := c.Segments
		if n < 0 || n > MaxSegments {
			return r.refuse(ctx, badInput(fmt.Sprintf("run input: continued.segments is %d, not 0 to %d", n, MaxSegments)))
		}
		r.segs = segs[:n]
	}
	return nil
}

// run is one workflow run of an agent run: its components, each with its
// own file, and the loop's own state (loop.go).
type run struct {
	cfg   *Config
	tools map[string]*activities.Tool
	in    RunInput
	// metricAgent is the agent tag of the run's metrics (agentTag), once
	// known.
	metricAgent string

	features       // the version gates the run took at its start
	callState      // the execution log (its one writer) and the keys
	conversation   // the messages (refs.go, loop.go)
	traceState     // the trace lines (calls.go, details.go)
	interruptState // holds, resumes, dangling calls (resume.go)
	carried        // continue-as-new and the state handed on (carry.go)
	streamState    // the live stream (stream.go)

	hooks    []string
	toolsets []protocol.ToolSpec // the toolsets' tools this run read
	// client are the run's client tools (client.go), clientSpecs their
	// specs for the model, clientHeld the current response's calls held
	// for the caller.
	client      map[string]*activities.Tool
	clientSpecs []protocol.ToolSpec
	clientHeld  []clientHold
	usage       *threadstate.Usage // the model responses' token counts, summed
	threadBase  *threadstate.Usage // the thread's counts before this chain (its loaded state's)
	// threadByModel is threadBase per model.
	threadByModel map[string]*threadstate.Usage
	// forkOf, on a forked thread, is where it came from; origin, in a
	// fork's run, the origin's records it serves from (fork.go).
	forkOf *threadstate.ForkOf
	origin *forkOrigin
	// offered names the tools the run is offered when it is not every
	// tool of the worker (narrowTools); r.tools holds those alone.
	offered *[]string
	// performed is this agent's held calls that resumes performed on the
	// thread (loaded, and this run's while keepPerformed), for forks.
	performed     []threadstate.PerformedCall
	keepPerformed bool
	// mview is the model's view of the conversation (compact.go).
	mview threadstate.ContextState
	// compacted lists this run's compactions, for its result.
	compacted []Compaction
	// subBusy is, per sub-agent thread, the future of its latest call;
	// subRuns the run its latest child was (subagent.go).
	subBusy map[string]wf.Future
	subRuns map[string]string
	// childChans: per sub-agent thread, the interrupts its running child
	// sent (routeChildSignals).
	childChans map[string]wf.Channel
	// withdrawn: the relayed interrupts their sub-agents withdrew
	// (workflow/run/interrupt id).
	withdrawn map[string]bool
	// holdRerun: the open tulip.unknown interrupt may run its call again
	// (executions are left).
	holdRerun bool
	// countsThread: the state, the result and the carry count the
	// thread's tokens (version 3 of "tulip-state-by-ref").
	countsThread bool
	save         bool // the run saves its thread state through a custom Checkpointer
	status       string
	turn         int
	runTurns     int // turns in this workflow run
	answer       string
	failure      string
	limit        int  // the payload limit, once read (see checkSize)
	ready        bool // the thread's state (or the carried state) is loaded

	namespace, scope, runID string
}

// features are the version gates a run takes at its start: what the code
// that recorded its history did, so that replay does the same. (Gates a
// run takes where the change happens, tulip-held-args, tulip-key-counter,
// tulip-interrupt-memo and tulip-stream-publishers, stay there: a marker's
// place in history is part of it.)
type features struct {
	carriesThread bool // tulip-thread-state: threads carry their conversation, runs continue as new
	stateByRef    bool // tulip-state-by-ref: state handed on by reference (refs.go)
	parallelCalls bool // tulip-parallel-calls: the calls of a response run at once
	// streamOnDemand (tulip-state-by-ref version 2): the live stream has
	// no coroutine; it reads its signals when it is read.
	streamOnDemand bool
}

// callState is the run's execution log and what its keys count.
type callState struct {
	calls      *calllog.Log // the execution log's one writer
	log        *dedup.Log   // calls.Records(), to read: only calls writes it
	dedup      bool         // the interceptor routes calls through calls (else: a run recorded without it, replaying)
	executions int          // executions started (for non-idempotent keys)
	baseLen    int          // log length after the thread's state loaded
	// thinEstimate is stateEstimate's count of the log's thin records.
	thinEstimate estimate
	// replayContexts are the tools' activity contexts while replaying,
	// placeholder stands for what a replayed command carries (unsent).
	replayContexts replayContexts
	placeholder    converter.RawValue
}

// conversation is the thread's conversation as the run holds it: its own
// messages in full, the earlier ones by reference.
type conversation struct {
	messages []threadstate.Message // the messages this run holds: the conversation from message base on
	base     int                   // the messages other runs hold (parts), which come first
	parts    []threadstate.Part    // which runs hold messages [0, base)
	// sent is the conversation the last model call saw (sentCursor): its
	// Digest is folded when read while sentPending.
	sent        activities.Cursor
	sentPending bool
	digest      string // the digest of the conversation but its last undigested messages (convDigest)
	undigested  int
	baseDigest  string // the digest of messages [0, base)
}

// convLen is the conversation's length: the messages other runs hold, then
// the ones this run holds.
func (c *conversation) convLen() int { return c.base + len(c.messages) }

// traceState is the run's trace: its own lines in full, earlier ones by
// reference.
type traceState struct {
	trace      []TraceLine        // the lines this run holds: the trace from line traceBase on
	traceMsg   []int              // each trace line's tool message, or -1
	traceBase  int                // the lines earlier runs of the chain hold
	traceParts []threadstate.Part // which runs hold lines [0, traceBase)
	summarized map[Outcome]int    // those lines' calls by outcome
	result     []byte             // the run's result, encoded once it completed
}

// interruptState is the run's interrupts: the open one, those answered,
// and the resume waiting to be taken.
type interruptState struct {
	interrupt  *Interrupt
	answered   map[string]bool
	pending    *ResumeInput
	interrupts int
	resumed    bool // a resume continued the run: calls execute without matching
	phase      int  // resumes so far
	phaseTurn  int  // the turn within the phase
	// hooksSignal is the hooks signal's channel, drained before every call.
	hooksSignal wf.ReceiveChannel
}

// carried is what the run took from its predecessor (continue-as-new) or
// its thread.
type carried struct {
	loaded    *threadstate.Checkpoint
	segs      [][]byte   // the carried segments (JSON), passed on as they came
	bounds    []segBound // where each carried segment ends
	continued int        // continue-as-new steps so far
}

// streamState is the run's live stream.
type streamState struct {
	stream *streams.Stream // the run's stream (stream.go), or nil
	// refusing says whether the stream refuses batches from outside the
	// run (1), takes every batch as runs before did (-1), or does not
	// know yet (0; stream.go). streamToken is the publisher token of the
	// run's model activity ("": none); textPieces counts the text pieces
	// the stream took by turn and attempt (nil: a run that takes every
	// batch).
	refusing    int8
	streamToken string
	textPieces  map[[2]int]int
	// baseline: the run recorded tulip-baseline and takes the versions of
	// the changes it covers without gates of their own (versions.go).
	baseline bool
}

func badInput(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, protocol.ErrBadInput, nil)
}

// setUp readies the run for its first turn, or refuses or fails it (an
// error).
func (r *run) setUp(ctx wf.Context) error {
	info := wf.GetInfo(ctx)
	r.namespace, r.runID = info.Namespace, info.WorkflowExecution.RunID
	r.scope = "run:" + info.WorkflowExecution.ID
	if r.in.ThreadID != "" {
		r.scope = "thread:" + r.in.ThreadID
	}
	if r.in.Agent == "" {
		r.in.Agent = DefaultAgent
	}
	if r.in.MaxTurns <= 0 {
		r.in.MaxTurns = DefaultMaxTurns
	}
	if r.in.Model == "" {
		return r.refuse(ctx, badInput("run input names no model"))
	}
	if err := r.setClientTools(); err != nil {
		return r.refuse(ctx, err)
	}
	if err := r.changeHooks(HooksInput{Install: r.in.Hooks}); err != nil {
		return r.refuse(ctx, err)
	}
	r.takeBaseline(ctx)
	r.status = StatusRunning
	r.calls = calllog.New()
	r.log = r.calls.Records()
	if r.dedup = intercept.Installed(ctx); !r.dedup {
		// Without the interceptor no call would be matched or recorded:
		// the run fails instead of running without dedup. (Runs recorded
		// without it before this check replay as they ran.)
		if r.version(ctx, "tulip-plugin-required") == 1 {
			return r.refuse(ctx, temporal.NewNonRetryableApplicationError(
				"this worker runs tulip.AgentRun without tulip's interceptor: give it tulip.NewPlugin", protocol.ErrPluginMissing, nil))
		}
	}
	if err := r.registerHandlers(ctx); err != nil {
		return err
	}
	// Runs recorded before threads carried their conversation (and before
	// a run found its thread's runs itself) replay as they ran.
	r.carriesThread = r.version(ctx, "tulip-thread-state") == 1
	// Runs recorded before state went by reference carry and leave it in
	// full (carry.go, state.go).
	// Version 2 of the same gate (no marker of its own, so a new run's
	// history is no longer): the stream reads its signals when it is read,
	// with no coroutine of its own (streams.Options.ReadOnDemand).
	// Version 3: the thread's state, the run's result and its carry count
	// the thread's tokens (their sizes, which decisions read, change).
	if r.carriesThread {
		v := r.version(ctx, "tulip-state-by-ref")
		r.stateByRef, r.streamOnDemand, r.countsThread = v >= 1, v >= 2, v >= 3
	}
	if err := r.openStream(ctx); err != nil {
		return err
	}
	if err := r.start(ctx); err != nil {
		return r.fail(ctx, err) // not ready: fails with no state, which would be empty
	}
	if r.stateByRef {
		// Restored: what the predecessor carried is in the run's own
		// structures now, and the decoded carry would only hold memory
		// for as long as the run stays in a worker's cache.
		r.in.Continued = nil
	}
	r.ready = true
	return nil
}

// complete ends a run that answered: its result, its state.
func (r *run) complete(ctx wf.Context) error {
	r.status = StatusCompleted
	r.showDetails(ctx)
	// A replaying run on no thread (no state to save) can tell that its
	// result is unsent from the result's head, before its view is made.
	headOnly := r.in.ThreadID == "" && wf.IsReplaying(ctx) && r.headUnsent()
	unsent := headOnly
	var res RunResult
	if !headOnly {
		var lines []byte
		if wf.IsReplaying(ctx) {
			res = r.view() // the lines are encoded below only if the result is made
		} else {
			res, lines = r.viewEncoded()
		}
		if err := r.saveCheckpoint(ctx, &res); err != nil {
			return err
		}
		// Asked after saveCheckpoint, which may wait into live history.
		unsent = wf.IsReplaying(ctx) && r.resultUnsent(res)
		if !unsent {
			if err := r.makeResult(ctx, res, lines); err != nil {
				return err
			}
		}
	}
	if err := r.closeStream(ctx, true); err != nil {
		return err
	}
	if unsent && !wf.IsReplaying(ctx) {
		// The stream's settling waited into live history: the result is
		// sent after all. resultUnsent said its checks cannot decide
		// anything, so made now it is what it would have been before.
		if headOnly {
			res = r.view()
		}
		return r.makeResult(ctx, res, nil)
	}
	return nil
}

// makeResult encodes the run's result once, for the size check and as
// the workflow's result (lines: its trace's encoding, when made already).
func (r *run) makeResult(ctx wf.Context, res RunResult, lines []byte) error {
	enc, err := encodeResult(res, lines)
	if err != nil {
		return r.fail(ctx, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the run's result does not encode: %v", err), protocol.ErrPayloadTooLarge, nil))
	}
	if err := r.checkEncoded(ctx, "the run's result", enc); err != nil {
		return r.fail(ctx, err)
	}
	r.result = enc
	return nil
}

// resultUnsent reports whether a replaying run's result need not be
// made: the SDK matches the completion command to its recorded event by
// type alone and drops it, so the result matters only where the checks
// that encoding it makes could decide otherwise. It does when its head
// (all but the trace) does not encode, or when its size could pass
// MinPayloadLimit, where checkEncoded reads the payload limit (a side
// effect, recorded); a bound from the lines' lengths says it cannot.
func (r *run) resultUnsent(res RunResult) bool {
	trace := res.Trace
	res.Trace = nil
	head, err := json.Marshal(res)
	switch {
	case err != nil:
		return false
	case !r.carriesThread || r.limit < 0:
		return true
	case trace == nil:
		return len(head) <= MinPayloadLimit
	}
	return linesUnder(trace, MinPayloadLimit-len(head)+len("null"))
}

// headUnsent is resultUnsent for a run on no thread, asked before its
// view is made: of the view's head it encodes all but the summary, and
// bounds the summary and the lines. When it says the result is unsent,
// resultUnsent of the view would (no trace by reference either: the
// lines are under InlineStateLimit). False: make the view and ask that.
func (r *run) headUnsent() bool {
	head, err := json.Marshal(RunResult{Status: r.status, Agent: r.in.Agent, Answer: r.answer, Turns: r.turn,
		Interrupt: r.interrupt, Error: r.failure, ContinuedAsNew: r.continued, TraceFrom: r.traceBase, TraceParts: r.traceParts, Usage: r.usage, ClientTools: r.clientNames(), Compactions: r.compacted})
	switch {
	case err != nil:
		return false
	case !r.carriesThread || r.limit < 0:
		return true
	}
	return linesUnder(r.trace, MinPayloadLimit-len(head)+len("null")-r.summaryMax())
}

// summaryMax bounds the encoding of the view's summary, its member
// included: a count for each outcome it may hold, the run's outcomes,
// its lines' and what the chain's earlier runs counted.
func (r *run) summaryMax() int {
	const member = len(`,"summary":{}`)
	count := func(o Outcome) int { return strMax(string(o)) + len(":,") + numMax }
	n := member
	for _, o := range outcomes {
		n += count(o)
	}
	for o := range r.summarized {
		if !slices.Contains(outcomes, o) {
			n += count(o)
		}
	}
	for i := range r.trace {
		if o := r.trace[i].Outcome; !slices.Contains(outcomes, o) {
			n += count(o)
		}
	}
	return n
}

// start sets the run up: from its predecessor's carry (continue-as-new),
// or from the thread's state, then the user's message.
func (r *run) start(ctx wf.Context) error {
	if err := r.startFrom(ctx); err != nil {
		return err
	}
	return r.narrowTools(ctx)
}

func (r *run) startFrom(ctx wf.Context) error {
	if c := r.in.Continued; c != nil {
		if c.State != nil {
			if err := r.restoreRef(c); err != nil {
				return err
			}
			return r.setUpFork()
		}
		return r.restore(c, r.segs)
	}
	load := r.loadCheckpoint
	var listing wf.Future
	if r.stateByRef {
		load = r.loadThread
		listing = r.listToolsets(ctx)
	}
	if err := load(ctx); err != nil {
		return err
	}
	if listing != nil {
		var specs []protocol.ToolSpec
		if err := listing.Get(ctx, &specs); err != nil {
			return err
		}
		r.addToolsets(specs)
		if err := r.checkClientToolsets(); err != nil {
			return err
		}
	}
	if err := r.setUpFork(); err != nil {
		return err
	}
	if r.in.Message != "" {
		r.addMessage(threadstate.Message{Role: "user", Content: r.in.Message})
	}
	return nil
}

// view is the run so far (its result, a failure's details, QueryState).
// A large trace goes by reference (traceByRef).
func (r *run) view() RunResult {
	res, _ := r.viewAs(false)
	return res
}

// viewEncoded is view, and the encoding of its trace (nil when the
// trace is not the run's own lines): made once, to tell whether the
// lines go by reference, and to write into the result.
func (r *run) viewEncoded() (RunResult, []byte) { return r.viewAs(true) }

func (r *run) viewAs(encode bool) (RunResult, []byte) {
	res := RunResult{
		Status: r.status, Agent: r.in.Agent, ThreadID: r.in.ThreadID, Answer: r.answer,
		Turns: r.turn, Trace: r.trace, Interrupt: r.interrupt, Error: r.failure, ContinuedAsNew: r.continued,
		TraceFrom: r.traceBase, TraceParts: r.traceParts,
	}
	if r.usage != nil {
		u := *r.usage
		res.Usage = &u
	}
	if r.in.ThreadID != "" && r.countsThread {
		res.ThreadUsage = r.threadBase.Plus(r.usage)
	}
	res.ClientTools = r.clientNames()
	res.Compactions = r.compacted
	var lines []byte
	if r.stateByRef {
		res.Summary = r.summary()
		var over bool
		if encode {
			lines = encodeLines(res.Trace)
			over = len(lines) > InlineStateLimit
		} else {
			over = linesOverLimit(res.Trace, InlineStateLimit)
		}
		if over {
			r.traceByRef(&res)
			lines = nil
		}
		if res.Trace == nil {
			res.Trace = []TraceLine{} // an array, never null (as lines wrote it)
		}
	}
	return res, lines
}

// refuse fails a run refused before it began (a bad input, an unknown
// hook): its details are a RunResult with its error and no state, as every
// failure's are.
func (r *run) refuse(ctx wf.Context, err error) error {
	errType, msg := protocol.ErrBadInput, err.Error()
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		errType, msg = appErr.Type(), appErr.Message()
	}
	agent := r.in.Agent
	if agent == "" {
		agent = DefaultAgent
	}
	res := RunResult{Status: StatusFailed, Agent: agent, ThreadID: r.in.ThreadID, Trace: []TraceLine{}, Error: msg}
	// A client reading the refused run as any other finds it failed with
	// an empty log (handlers add no events: replay-safe to add here).
	if err := wf.SetQueryHandler(ctx, QueryState, func() (StateView, error) { return res, nil }); err != nil {
		return err
	}
	if err := wf.SetQueryHandler(ctx, QueryLog, func() ([]dedup.Record, error) { return []dedup.Record{}, nil }); err != nil {
		return err
	}
	return temporal.NewNonRetryableApplicationError(msg, errType, nil, res)
}

// fail ends the run with a non-retryable failure whose details hold the run
// result, checkpoint included, so the thread keeps what this run recorded.
// Details too large to write are left out: the next run on the thread then
// reads this run's records from its history.
func (r *run) fail(ctx wf.Context, cause error) error {
	r.status = StatusFailed
	// The failure keeps the type and message of the application error
	// that caused it (a model's openai.Rejected, say), without wrapping
	// it again: one line, one type.
	errType, msg := protocol.ErrRunFailed, cause.Error()
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) && appErr.Type() != "" {
		errType, msg = appErr.Type(), appErr.Message()
	}
	r.failure = msg
	r.showDetails(ctx)
	if err := r.closeStream(ctx, true); err != nil {
		return err
	}
	res := r.view()
	if !r.ready {
		// The run never had its thread's state: its details hold no state
		// (the next run must not take an empty one for the thread's).
		if !r.stateByRef {
			return temporal.NewNonRetryableApplicationError(msg, errType, nil)
		}
		return temporal.NewNonRetryableApplicationError(msg, errType, nil, res)
	}
	if err := r.saveCheckpoint(ctx, &res); err != nil {
		return temporal.NewNonRetryableApplicationError(msg, errType, nil)
	}
	if r.checkSize(ctx, "the failure's details", res) != nil {
		return temporal.NewNonRetryableApplicationError(msg, errType, nil)
	}
	return temporal.NewNonRetryableApplicationError(msg, errType, nil, res)
}

// MinPayloadLimit is the smallest PayloadLimit a worker may set: payloads
// up to it never need the limit, so runs that write none larger record
// nothing about it.
const MinPayloadLimit = 256 << 10

// checkSize fails when v's JSON is over the payload limit. The limit is the
// worker's configuration, so a payload larger than MinPayloadLimit reads it
// through a side effect: replay takes the recorded value, whatever the
// replaying worker is configured with.
func (r *run) checkSize(ctx wf.Context, what string, v any) error {
	if !r.carriesThread || r.limit < 0 {
		// No limit (read already, and recorded): whatever the size, the
		// check passes and reads nothing, so there is nothing to encode.
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s does not encode: %v", what, err), protocol.ErrPayloadTooLarge, nil)
	}
	return r.checkEncoded(ctx, what, b)
}

// checkEncoded is checkSize of a value encoded already (b).
func (r *run) checkEncoded(ctx wf.Context, what string, b []byte) error {
	if !r.carriesThread || r.limit < 0 {
		return nil
	}
	if len(b) <= MinPayloadLimit {
		return nil
	}
	limit, err := r.payloadLimit(ctx)
	if err != nil {
		return err
	}
	if limit > 0 && len(b) > limit {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s is %s, over the %s payload limit: configure external storage on the client and set the worker's PayloadLimit to -1",
				what, byteSize(len(b)), byteSize(limit)), protocol.ErrPayloadTooLarge, nil)
	}
	return nil
}

// payloadLimit reads the worker's payload limit (negative: none) through a
// side effect: replay takes the recorded value, whatever the replaying
// worker is configured with.
func (r *run) payloadLimit(ctx wf.Context) (int, error) {
	if r.limit == 0 {
		if err := wf.SideEffect(ctx, func(wf.Context) any {
			if r.cfg.PayloadLimit == 0 {
				return DefaultPayloadLimit
			}
			return r.cfg.PayloadLimit
		}).Get(&r.limit); err != nil {
			return 0, err
		}
	}
	return r.limit, nil
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
