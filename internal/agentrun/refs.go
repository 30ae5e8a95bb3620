package agentrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/temporal"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// State by reference. Every message, argument and result enters the history
// of the run that wrote it, once; that run holds it in memory whenever it is
// replayed (a query on a closed run replays it). The state a run hands on
// (to its continuation, to its thread's next run) names those runs instead
// of copying their content: the conversation as parts held by runs, the
// logs as thin records (arguments as a hash, which matching needs; results
// over InlineLimit as the conversation message that holds them), the trace
// as thin lines. Its size grows with the number of calls, not with their
// content, and a run never writes another run's content again. Readers that
// need the content (the model activity, agent.Log, tulip inspect) page it
// from the runs that hold it with QueryPage.

// InlineLimit is the most content (arguments, a result) a thin record or
// trace line keeps; larger content is left to the run that holds it.
const InlineLimit = 512

// InlineStateLimit is the largest state a run hands on in full: what it
// holds goes in the state itself, so a reader needs no other run to read
// it. A larger state goes by reference.
const InlineStateLimit = 256 << 10

// handover is the state the run hands on (to its continuation, its thread's
// next run, a QueryThread reader): in full when that is small, else by
// reference.
func (r *run) handover(settledOnly bool) (*threadstate.Checkpoint, error) {
	if r.fullStateOver(settledOnly, InlineStateLimit) {
		return r.refState(settledOnly, false) // as below, without encoding the state in full to learn it
	}
	st, err := r.refState(settledOnly, true)
	if err != nil || jsonSize(st) <= InlineStateLimit {
		return st, err
	}
	return r.refState(settledOnly, false)
}

// traceFor is the trace that goes with a state: by reference with a state
// by reference (the parts that hold it, this run's last), else the parts
// that hold its first lines and the lines this run holds, in full.
func (r *run) traceFor(thin bool) (parts []threadstate.Part, lines []TraceLine) {
	parts = slices.Clone(r.traceParts)
	if !thin {
		return parts, r.trace
	}
	if len(r.trace) > 0 {
		parts = append(parts, threadstate.Part{Run: r.runID, From: r.traceBase, To: r.traceBase + len(r.trace)})
	}
	return parts, nil
}

// adopt takes a thread state (loaded, or carried across continue-as-new):
// this agent's log, and the conversation, by reference or in full.
func (r *run) adopt(cp *threadstate.Checkpoint) error {
	if snap, ok := cp.Agents[r.in.Agent]; ok && r.dedup {
		l, err := dedup.Restore(snap)
		if err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("thread %s: %v", r.in.ThreadID, err), protocol.ErrCheckpoint, nil)
		}
		r.calls.Load(l)
		r.log = l
	}
	// The run keeps of the state only what it reads again: the other
	// agents' logs and the key counts. This agent's log is r.log now (or,
	// without the interceptor, never read: every reader skips it), and
	// the messages are r.messages: the encoded snapshot and a second
	// array of messages would only hold memory for the run's life.
	r.loaded = &threadstate.Checkpoint{Minted: cp.Minted}
	r.performed = slices.Clone(cp.Performed[r.in.Agent])
	for name, calls := range cp.Performed {
		if name != r.in.Agent {
			if r.loaded.Performed == nil {
				r.loaded.Performed = map[string][]threadstate.PerformedCall{}
			}
			r.loaded.Performed[name] = calls
		}
	}
	r.threadBase, r.threadByModel = cp.Usage, cp.UsageByModel
	r.forkOf = cp.Fork
	r.adoptContext(cp.Context)
	if cp.Agents != nil {
		r.loaded.Agents = make(map[string]json.RawMessage, len(cp.Agents))
		for name, snap := range cp.Agents {
			if name != r.in.Agent {
				r.loaded.Agents[name] = snap
			}
		}
	}
	r.messages, r.digest, r.undigested, r.base, r.baseDigest, r.parts = nil, "", 0, 0, "", nil
	if cv := cp.Conversation; cv != nil {
		if err := checkParts(cv); err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("thread %s: %v", r.in.ThreadID, err), protocol.ErrCheckpoint, nil)
		}
		r.base, r.digest, r.baseDigest, r.parts = cv.Count, cv.Digest, cv.Digest, cv.Parts
	}
	for _, m := range cp.Messages {
		r.addMessage(m)
	}
	// The first model call's cursor starts after the messages other runs
	// hold (the model activity reads them from its cache, or from those
	// runs); the ones that came in full go with it.
	r.setSent(activities.Cursor{Count: r.base, Digest: r.baseDigest})
	return nil
}

func checkParts(cv *threadstate.ConversationRef) error {
	at := 0
	for _, p := range cv.Parts {
		if p.From != at || p.To <= p.From || p.Run == "" {
			return fmt.Errorf("conversation part [%d, %d) of run %q does not follow message %d", p.From, p.To, p.Run, at)
		}
		at = p.To
	}
	if at != cv.Count {
		return fmt.Errorf("conversation parts end at message %d, not %d", at, cv.Count)
	}
	return nil
}

// refState is the run's thread state by reference: the conversation up to
// the last model call's cursor as parts (this run's own part last), the
// messages after it in full (the last response's tool results, and for a
// run stopped mid-response an error result for each unanswered call), and
// every agent's log thin. With full, what this run holds stays in full
// (for a custom Checkpointer, which must not depend on histories).
func (r *run) refState(settledOnly, full bool) (*threadstate.Checkpoint, error) {
	cp := &threadstate.Checkpoint{Run: r.runID, Agents: map[string]json.RawMessage{}}
	resultIn := r.resultMessages()
	for name, snap := range r.loadedAgents() {
		if name == r.in.Agent {
			continue
		}
		if !full {
			l, err := dedup.Restore(snap)
			if err != nil {
				return nil, temporal.NewNonRetryableApplicationError(err.Error(), protocol.ErrCheckpoint, nil)
			}
			if snap, err = l.ThinSnapshot(l.Len(), r.runID, InlineLimit, resultIn); err != nil {
				return nil, temporal.NewNonRetryableApplicationError(err.Error(), protocol.ErrCheckpoint, nil)
			}
		}
		cp.Agents[name] = snap
	}
	n := r.log.Len()
	if settledOnly {
		n = r.log.Settled()
	}
	var snap []byte
	var err error
	if full {
		if settledOnly {
			snap, err = r.log.SnapshotSettled()
		} else {
			snap, err = r.log.Snapshot()
		}
	} else {
		snap, err = r.log.ThinSnapshot(n, r.runID, InlineLimit, resultIn)
	}
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), protocol.ErrCheckpoint, nil)
	}
	cp.Agents[r.in.Agent] = snap
	cp.Minted = r.minted(n)
	if r.countsThread {
		cp.Usage, cp.UsageByModel = r.threadUsage()
	}
	cp.Fork = r.forkOf
	cp.Performed = r.performedState()
	cp.Context = r.contextState()

	closing := closeConversation(r.messages)[len(r.messages):]
	split, digest, parts := r.base, r.baseDigest, slices.Clone(r.parts)
	if !full {
		sent := r.sentCursor()
		split, digest = sent.Count, sent.Digest
		if split > r.base {
			parts = append(parts, threadstate.Part{Run: r.runID, From: r.base, To: split})
		}
	}
	if split > 0 {
		cp.Conversation = &threadstate.ConversationRef{Count: split, Digest: digest, Parts: parts}
	}
	cp.Messages = slices.Concat(r.messages[split-r.base:], closing)
	return cp, nil
}

// loadedAgents is every agent's log as loaded or carried in (this agent's
// included, which r.log replaces).
func (r *run) loadedAgents() map[string]json.RawMessage {
	if r.loaded == nil {
		return nil
	}
	return r.loaded.Agents
}

// resultMessages finds, for a record this run holds in full, the message
// of the conversation whose content is its result: the tool message of its
// call.
func (r *run) resultMessages() func(rec *dedup.Record) (int, bool) {
	type at struct {
		turn int
		call string
	}
	byLine := map[at]int{}
	for i, l := range r.trace {
		if m := r.traceMsg[i]; m >= 0 {
			byLine[at{l.Turn, l.CallID}] = m
		}
	}
	var byCall map[string][]int // built on first need: records adopted in full
	return func(rec *dedup.Record) (int, bool) {
		if m, ok := byLine[at{rec.Turn, rec.CallID}]; ok && r.messageContent(m) == string(rec.Result) {
			return m, true
		}
		if byCall == nil {
			byCall = map[string][]int{}
			for i, m := range r.messages {
				if m.Role == "tool" && m.ContentIn == nil {
					byCall[m.ToolCallID] = append(byCall[m.ToolCallID], r.base+i)
				}
			}
		}
		for _, m := range byCall[rec.CallID] {
			if r.messageContent(m) == string(rec.Result) {
				return m, true
			}
		}
		return 0, false
	}
}

// messageContent is the content of message i if this run holds it.
func (r *run) messageContent(i int) string {
	if i < r.base || i >= r.convLen() {
		return ""
	}
	m := r.messages[i-r.base]
	if m.ContentIn != nil {
		return ""
	}
	return m.Content
}

// traceByRef leaves every line of res's trace to the run that holds it:
// res.TraceParts name them, QueryPage reads them (agent.Trace does).
func (r *run) traceByRef(res *RunResult) {
	res.TraceParts, res.Trace = r.traceFor(true)
	res.TraceFrom = r.traceBase + len(r.trace)
}

// summary counts the run's calls by final outcome (a held call counts once,
// as what became of it): the lines earlier runs of the chain hold, and this
// run's.
func (r *run) summary() map[Outcome]int {
	type at struct {
		turn int
		call string
	}
	final := make(map[at]Outcome, len(r.trace))
	order := make([]at, 0, len(r.trace))
	for _, l := range r.trace {
		k := at{l.Turn, l.CallID}
		if _, ok := final[k]; !ok {
			order = append(order, k)
		}
		final[k] = l.Outcome
	}
	out := maps.Clone(r.summarized)
	if out == nil {
		out = map[Outcome]int{}
	}
	for _, k := range order {
		out[final[k]]++
	}
	return out
}

// restoreRef takes a continue-as-new carry written by reference.
func (r *run) restoreRef(c *Carry) error {
	if err := r.adopt(c.State); err != nil {
		return err
	}
	r.hooks = nil
	if err := r.changeHooks(HooksInput{Install: c.Hooks}); err != nil {
		return err
	}
	r.turn, r.phase, r.phaseTurn, r.resumed = c.Turn, c.Phase, c.PhaseTurn, c.Resumed
	r.interrupts, r.executions, r.baseLen, r.continued = c.Interrupts, c.Executions, c.BaseLen, c.Continued
	r.save = c.Save // a decision in the chain's history, as its first run took it
	r.usage, r.threadBase, r.threadByModel = c.Usage, c.ThreadUsage, c.ThreadUsageByModel
	r.addToolsets(c.Toolsets)
	r.trace, r.traceParts, r.summarized = c.Trace, c.TraceParts, c.Summary
	internLines(r.trace)
	r.shareLines()
	for i, p := range c.TraceParts {
		if p.From != r.traceBase || p.To <= p.From || p.Run == "" {
			return badInput(fmt.Sprintf("continued state: trace part %d [%d, %d) does not follow line %d", i, p.From, p.To, r.traceBase))
		}
		r.traceBase = p.To
	}
	r.traceMsg = make([]int, len(c.Trace))
	for i := range r.traceMsg {
		r.traceMsg[i] = -1
	}
	for _, id := range c.Answered {
		r.answered[id] = true
	}
	if r.log.Response() != c.Responses {
		return badInput(fmt.Sprintf("continued state: the log has %d responses, the carry says %d", r.log.Response(), c.Responses))
	}
	// The last model call's cursor goes on: the model activity's cache
	// still holds what it saw, and the messages after it came in full.
	if c.Sent.Count < r.base || c.Sent.Count > r.convLen() || c.Digest != r.convDigest() ||
		threadstate.ExtendDigest(r.baseDigest, r.messages[:c.Sent.Count-r.base]...) != c.Sent.Digest {
		return badInput(fmt.Sprintf("continued state: the model cursor (message %d) and the conversation (parts to %d, %d messages) disagree",
			c.Sent.Count, r.base, r.convLen()))
	}
	r.setSent(c.Sent)
	return nil
}

// continueByRef hands the run's state to a new workflow run by reference.
func (r *run) continueByRef(ctx wf.Context) error {
	if wf.IsReplaying(ctx) && (!r.carriesThread || r.limit != 0) {
		// The SDK matches the continue-as-new command to its recorded
		// event by type alone and drops it, and with the payload limit
		// read already (or none) its size check reads no side effect:
		// its input is not made (unsent, as a replayed activity's).
		return wf.NewContinueAsNewError(ctx, WorkflowName, r.unsent())
	}
	st, err := r.handover(false)
	if err != nil {
		return err
	}
	// The trace goes whole while it is small, else by reference.
	thin := linesOverLimit(r.trace, InlineStateLimit)
	parts, lines := r.traceFor(thin)
	summary := r.summarized
	if thin {
		summary = r.summary() // the lines this run holds go by reference too
	}
	c := &Carry{Hooks: r.hooks, Turn: r.turn, Phase: r.phase, PhaseTurn: r.phaseTurn, Resumed: r.resumed,
		Interrupts: r.interrupts, Answered: slices.Sorted(maps.Keys(r.answered)), Executions: r.executions,
		BaseLen: r.baseLen, Responses: r.log.Response(), Sent: r.sentCursor(), Digest: r.convDigest(), Continued: r.continued + 1,
		State: st, Trace: lines, TraceParts: parts, Summary: summary, Toolsets: r.toolsets, Save: r.save, Usage: r.usage}
	if r.countsThread {
		c.ThreadUsage, c.ThreadUsageByModel = r.threadBase, r.threadByModel
	}
	if r.stream != nil {
		if c.Stream, err = r.stream.State(); err != nil {
			return err
		}
	}
	next := r.in
	next.Hooks, next.Message, next.PreviousRunID, next.Continued = nil, "", "", c
	if r.origin != nil {
		next.Fork = r.origin.carried()
	}
	enc, err := encodeContinued(next)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the continue-as-new state does not encode: %v", err), protocol.ErrPayloadTooLarge, nil)
	}
	if err := r.checkEncoded(ctx, "the continue-as-new state", enc); err != nil {
		return err
	}
	r.count(ctx, "continue-as-new", MetricContinuedAsNew, 1)
	r.gaugeOf(ctx, "continue-as-new-bytes", MetricStateBytes, func() int { b, _ := json.Marshal(st); return len(b) }, "continue_as_new")
	return continueAsNew(ctx, activities.JSONPayload(enc))
}

// continueAsNew continues the run as new. On a Worker Deployment the next
// run starts on the deployment's current version (auto-upgrade), then is
// pinned there as any run (docs/deploy.md): the carry is the protocol's,
// which every version reads. The SDK matches the command by its type
// alone, so runs recorded before replay unchanged.
func continueAsNew(ctx wf.Context, input any) error {
	return wf.NewContinueAsNewErrorWithOptions(ctx, wf.ContinueAsNewErrorOptions{
		InitialVersioningBehavior: wf.ContinueAsNewVersioningBehaviorAutoUpgrade}, WorkflowName, input)
}

// Bounds of what a turn adds to the state a run carries (refs.go): a
// thin record and a thin trace line per call, each with at most
// InlineLimit of content and a recorded error of at most
// calllog.MaxErrorMessage bytes.
const (
	turnHeadroom = 64 << 10
	perCall      = 2*(400+InlineLimit) + 2*(calllog.MaxErrorMessage+256)
)

// checkBudget fails the run, before a model turn (calls 0) or before the
// calls of a response run, when the state it must carry on (its result, its
// continue-as-new input, a failure's details) could grow past the payload
// limit: never after side effects that could then not be recorded.
func (r *run) checkBudget(ctx wf.Context, calls int) error {
	if !r.stateByRef || r.limit < 0 {
		return nil // no limit (read already)
	}
	if r.limit > 0 && r.stateBound(false)+turnHeadroom+calls*perCall <= r.limit {
		return nil // under the limit read already, by a bound that costs no encoding
	}
	size := r.stateEstimate() + turnHeadroom + calls*perCall
	if size <= MinPayloadLimit {
		return nil
	}
	limit, err := r.payloadLimit(ctx)
	if err != nil {
		return err
	}
	if limit > 0 && size > limit {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the run's state (%d records, %d trace lines, %s) could pass the %s payload limit with another turn: configure external storage on the client and set the worker's PayloadLimit to -1",
				r.log.Len(), len(r.trace), byteSize(r.stateEstimate()), byteSize(limit)), protocol.ErrPayloadTooLarge, nil)
	}
	return nil
}

// stateEstimate bounds the size of the state by reference the run would
// carry now, without encoding it.
func (r *run) stateEstimate() int { return r.stateBound(true) }

// stateBound is stateEstimate, its messages counted exactly (exact) or
// by a looser bound that reads only their lengths.
func (r *run) stateBound(exact bool) int {
	content := func(n int) int { return min(n, InlineLimit+2) }
	size := 1024
	if o := r.origin; o != nil {
		// A fork's origin goes with every continue-as-new.
		size += len(o.in.Origin) + 12*len(o.used) + len(o.in.Thread) + 64
	}
	for name, snap := range r.loadedAgents() {
		if name != r.in.Agent {
			size += len(snap)
		}
	}
	recSize := func(rec *dedup.Record) int {
		n := 400 + len(rec.Tool) + len(rec.CallID) + len(rec.Key) + len(rec.Run) + len(rec.Holder) + len(r.runID) + content(len(rec.Result))
		if rec.Error != nil {
			n += 64 + len(rec.Error.Type) + len(rec.Error.Message)
		}
		return n
	}
	// Thin records never change: their part is counted once (the log
	// builds each one it gives out).
	from := r.log.ThinLen()
	if c := &r.thinEstimate; c.log != r.log || c.n != from {
		*c = estimate{log: r.log, n: from}
		for i := range from {
			c.size += recSize(r.log.At(i))
		}
	}
	size += r.thinEstimate.size
	for i := from; i < r.log.Len(); i++ {
		size += recSize(r.log.At(i))
	}
	for _, l := range r.trace {
		size += 400 + len(l.CallID) + len(l.Tool) + len(l.Key) + len(r.runID) + content(len(l.Arguments)) + content(len(l.Result))
		if l.Error != nil {
			size += len(*l.Error)
		}
	}
	for i := range r.messages[r.sent.Count-r.base:] {
		m := &r.messages[r.sent.Count-r.base+i]
		if exact {
			size += threadstate.MessageJSONSize(m)
		} else {
			size += messageMax(m)
		}
	}
	return size
}

// estimate is stateEstimate's count of a log's first n records.
type estimate struct {
	log     *dedup.Log
	n, size int
}

// internLines keeps the few distinct names of decoded trace lines (tools,
// outcomes, relations, near misses' reasons and paths) once each, not once
// a line.
func internLines(lines []TraceLine) {
	names := map[string]string{}
	intern := func(p *string) {
		if v, ok := names[*p]; ok {
			*p = v
		} else if *p != "" {
			names[*p] = *p
		}
	}
	for i := range lines {
		l := &lines[i]
		intern(&l.Tool)
		intern((*string)(&l.Outcome))
		intern((*string)(&l.Relation))
		if nm := l.NearMiss; nm != nil {
			intern((*string)(&nm.Reason))
			for k := range nm.Differences {
				intern(&nm.Differences[k].Path)
			}
		}
	}
}

// shareLines makes the carried trace lines share their texts with the
// log's records of the same calls (call id, key, result), decoded apart:
// the run holds each once.
func (r *run) shareLines() {
	type at struct {
		turn int
		call string
	}
	recs := make(map[at]*dedup.Record, r.log.Len())
	for i := range r.log.Len() {
		rec := r.log.At(i)
		recs[at{rec.Turn, rec.CallID}] = rec
	}
	for i := range r.trace {
		l := &r.trace[i]
		rec := recs[at{l.Turn, l.CallID}]
		if rec == nil {
			continue
		}
		l.CallID = rec.CallID
		if l.Key == rec.Key {
			l.Key = rec.Key
		}
		if l.Result != nil && bytes.Equal(l.Result, rec.Result) {
			l.Result = rec.Result
		}
	}
}

// threadUsage is the thread's token counts through now, in all and per
// model (this chain's under its model's name).
func (r *run) threadUsage() (*threadstate.Usage, map[string]*threadstate.Usage) {
	total := r.threadBase.Plus(r.usage)
	byModel := threadstate.CloneUsage(r.threadByModel)
	if r.usage != nil {
		if byModel == nil {
			byModel = map[string]*threadstate.Usage{}
		}
		byModel[r.in.Model] = byModel[r.in.Model].Plus(r.usage)
	}
	return total, byModel
}
