package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// ModelRequest asks a model for its next response. It is what a Model
// sees: the whole conversation (after the worker's ConversationPolicy) and
// the worker's tools.
type ModelRequest struct {
	// Model selects a model registered on the worker.
	Model  string `json:"model"`
	Agent  string `json:"agent"`
	Thread string `json:"thread,omitempty"`
	// Turn is the 1-based model response of this run, resumed turns
	// included (continue-as-new keeps counting).
	Turn int `json:"turn"`
	// Phase counts the resumes before this turn that answered a hook's
	// interrupt (a person's answer; not client tools' results nor an
	// answer about a held unknown outcome); PhaseTurn is the 1-based turn
	// within the phase. Scripted models use them.
	Phase     int `json:"phase"`
	PhaseTurn int `json:"phase_turn"`
	// Messages is the conversation so far: the thread's earlier runs, then
	// this run's.
	Messages []threadstate.Message `json:"messages"`
	// Tools are the tools the model may call: the worker's, then the
	// run's client tools (RunInput.ClientTools), which the caller runs.
	Tools []protocol.ToolSpec `json:"tools"`
	// Instructions are the run's own instructions (RunInput.Instructions):
	// a model sends them as its system prompt, after its own ("" none).
	Instructions string `json:"instructions,omitempty"`
	// Params are the run's sampling parameters (RunInput.Params), each
	// sent when set, over the model's own. Nil: none.
	Params *protocol.ModelParams `json:"params,omitempty"`
	// Summary: the run asks for a summary of Messages, to send the model
	// in their place from now on (compaction, docs/context.md). Answer
	// with text and no tool calls (Tools is empty).
	Summary bool `json:"summary,omitempty"`
	// OnText, when set, takes the answer as the model generates it: a model
	// that can stream calls it with each piece of text, in order (the whole
	// text still goes in the response). Nil when the run does not stream
	// text. The OpenAI adapter streams when it is set.
	OnText func(delta string) `json:"-"`
}

// ModelResponse is one model turn. No tool calls means a final answer.
type ModelResponse struct {
	Text      string                 `json:"text,omitempty"`
	ToolCalls []threadstate.ToolCall `json:"tool_calls,omitempty"`
	// InstallHooks and RemoveHooks change the run's before-hooks before
	// this response's calls are handled (scripted scenarios use them).
	InstallHooks []string `json:"install_hooks,omitempty"`
	RemoveHooks  []string `json:"remove_hooks,omitempty"`
	// Usage is the tokens the model reports for this response, if any.
	Usage *threadstate.Usage `json:"usage,omitempty"`
	// Streamed is set by the model activity when it streamed the answer.
	Streamed *Streamed `json:"streamed,omitempty"`
	// Context is set by the model activity: the model's context budget
	// and what this request sent (compaction's measure).
	Context *ContextReport `json:"context,omitempty"`
}

// Model produces an agent's responses. It runs in an activity, so it may
// do I/O; Temporal retries its retryable errors.
type Model interface {
	Respond(ctx context.Context, req ModelRequest) (ModelResponse, error)
}

// PublicModel adapts a model of package tulip's Model interface (or one of
// this package's, returned as it is) for this package. Package tulip sets
// it when it is initialized: it imports this package, which so cannot
// import it. The CLI and the module's tests, which build workers from
// internal options, take public models (openaimodel's, say) through it.
var PublicModel func(m any) Model

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req ModelRequest) (ModelResponse, error)

// Respond calls f.
func (f ModelFunc) Respond(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	return f(ctx, req)
}

// ConversationPolicy chooses what a model is shown of the conversation. It
// runs on the worker, in the model activity: it never changes what the
// workflow holds, what the logs hold, or how calls match.
type ConversationPolicy func(messages []threadstate.Message) []threadstate.Message

// LastTurns is a ConversationPolicy that shows the model the last n user
// messages and everything after the first of them (n <= 0: everything).
func LastTurns(n int) ConversationPolicy {
	return func(msgs []threadstate.Message) []threadstate.Message {
		if n <= 0 {
			return msgs
		}
		seen := 0
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == "user" {
				if seen++; seen == n {
					return msgs[i:]
				}
			}
		}
		return msgs
	}
}

// ModelInput is the model activity's input. The conversation travels as a
// cursor: Base names the conversation the run's previous model call saw (its
// length and digest) and New holds only the messages added since, so a
// turn writes O(new messages) into history, not O(conversation). The
// activity rebuilds the whole conversation from its cache, or, on a miss
// (another worker, a restart), from the run itself (QueryConversation), and
// checks Digest before it calls the model.
//
// Histories recorded before the cursor carry the whole conversation in
// Messages and the tool specs in Tools; the activity still accepts them.
type ModelInput struct {
	Model     string `json:"model"`
	Agent     string `json:"agent"`
	Thread    string `json:"thread,omitempty"`
	Turn      int    `json:"turn"`
	Phase     int    `json:"phase"`
	PhaseTurn int    `json:"phase_turn"`
	// Cursor is true for inputs that carry the conversation as a cursor
	// (Base, New, Digest); legacy inputs carry Messages.
	Cursor bool `json:"cursor,omitempty"`
	// Base is the conversation the previous model call of the run saw.
	Base *Cursor `json:"base,omitempty"`
	// New are the messages after Base.
	New []threadstate.Message `json:"new,omitempty"`
	// Digest is the digest of Base followed by New.
	Digest string `json:"digest,omitempty"`

	// Messages (legacy inputs only) is the whole conversation.
	Messages []threadstate.Message `json:"messages,omitempty"`
	// Tools (legacy inputs only) are the tool specs.
	Tools []protocol.ToolSpec `json:"tools,omitempty"`
	// TextStream, when set, streams the answer to the run's stream.
	TextStream *TextStream `json:"text_stream,omitempty"`
	// Instructions, Params and ClientTools are the run's
	// (RunInput.Instructions, Params, ClientTools), for the request.
	Instructions string                `json:"instructions,omitempty"`
	Params       *protocol.ModelParams `json:"params,omitempty"`
	ClientTools  []protocol.ToolSpec   `json:"client_tools,omitempty"`
	// Compaction, when set, sends the model a summary in place of the
	// conversation's first messages (docs/context.md).
	Compaction *Compaction `json:"compaction,omitempty"`
	// Offered, when set, names the worker's tools the run is offered
	// (RunInput.Tools): the others are not shown. Nil: every tool.
	Offered *[]string `json:"offered,omitempty"`
}

// Cursor names a conversation prefix: its length and digest.
type Cursor struct {
	Count  int    `json:"count"`
	Digest string `json:"digest"`
}

// Models is the model activity of a worker: it rebuilds the conversation,
// applies the policy, and routes the request to the model named in it.
type Models struct {
	ByName map[string]Model
	// Tools are the worker's tool specs, shown to the model.
	Tools []protocol.ToolSpec
	// Policy chooses what the model is shown. Zero value: everything.
	Policy ConversationPolicy
	// Cache holds recent conversations by digest. Zero value (nil): every
	// request rebuilds its conversation from the run (NewModelActivity
	// makes one).
	Cache *ConversationCache
	// Toolsets' tools are shown to the model after Tools (as each toolset
	// lists them now; a run uses the list it read when it started).
	Toolsets []Toolset
	// PayloadLimit bounds a response: a larger one fails the model call
	// with ErrPayloadTooLarge (non-retryable) before the run acts on it,
	// instead of a completion the server refuses. Zero or negative: none.
	PayloadLimit int
	// Store is the worker's thread store (TemporalCheckpointer.Store): a
	// conversation whose earlier runs are gone is read from it. Zero
	// value: none.
	Store threadstate.Checkpointer
	// Budgets are, per model name, the most input tokens a call may send
	// (compaction keeps the conversation under them, docs/context.md).
	// A model without one has no budget.
	Budgets map[string]int
}

// NewModels returns the model activity for models, tools and policy, with
// a conversation cache of DefaultCacheNodes nodes and DefaultCacheBytes.
func NewModels(models map[string]Model, tools []protocol.ToolSpec, policy ConversationPolicy) *Models {
	return &Models{ByName: models, Tools: tools, Policy: policy, Cache: NewConversationCache(DefaultCacheNodes)}
}

// Respond is the ModelActivity function.
func (m *Models) Respond(ctx context.Context, in ModelInput) (ModelResponse, error) {
	model, ok := m.ByName[in.Model]
	if !ok {
		return ModelResponse{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no model named %q on this worker", in.Model), protocol.ErrUnknownModel, nil)
	}
	// Heartbeats from the start: reading the conversation from the run (a
	// query, which a busy worker may take seconds to answer) is part of
	// the attempt, and an attempt that heartbeat only once the model was
	// called timed out, attempt after attempt, under load.
	ctx, stop, note := heartbeatWith(ctx)
	defer stop()
	if resp, ok := notedAnswer(ctx); ok {
		// An earlier attempt received the answer and died before it
		// returned: the model is not asked (and billed) again.
		if in.Cursor {
			m.remember(in, AssistantMessage(resp))
		}
		return resp, nil
	}
	req := ModelRequest{Model: in.Model, Agent: in.Agent, Thread: in.Thread, Turn: in.Turn, Phase: in.Phase,
		PhaseTurn: in.PhaseTurn, Messages: in.Messages, Tools: in.Tools, Instructions: in.Instructions, Params: in.Params}
	if in.Cursor {
		msgs, err := m.conversation(ctx, in)
		if err != nil {
			return ModelResponse{}, err
		}
		req.Messages, req.Tools = msgs, m.Tools
		if len(m.Toolsets) > 0 {
			req.Tools = slices.Clone(m.Tools)
			for _, ts := range m.Toolsets {
				specs, err := ts.Tools(ctx)
				if err != nil {
					return ModelResponse{}, err
				}
				req.Tools = append(req.Tools, specs...)
			}
		}
	}
	if in.Offered != nil {
		req.Tools = offeredOnly(req.Tools, *in.Offered)
	}
	if in.Compaction != nil {
		view, err := in.Compaction.view(req.Messages)
		if err != nil {
			return ModelResponse{}, err
		}
		req.Messages = view
	}
	if len(in.ClientTools) > 0 {
		req.Tools = append(slices.Clone(req.Tools), in.ClientTools...)
	}
	if m.Policy != nil {
		req.Messages = m.Policy(req.Messages)
	}
	budget := m.Budgets[in.Model]
	sent := EstimateTokens(&req)
	if budget > 0 && sent > budget {
		// Not sent: the provider would refuse it (and bill the attempt).
		return ModelResponse{}, tooLong(in.Model, sent, budget, "")
	}
	text := m.textStream(ctx, in, &req)
	start := time.Now()
	resp, err := model.Respond(ctx, req)
	var refused *temporal.ApplicationError
	if errors.As(err, &refused) && refused.Type() == ErrContextTooLong && !refused.HasDetails() {
		// The provider's refusal, with what this request measured.
		err = tooLong(in.Model, sent, budget, refused.Message())
	}
	if err == nil {
		resp.Context = &ContextReport{Budget: budget, Sent: sent}
		if resp.Usage != nil && resp.Usage.PromptTokens > 0 {
			resp.Context.Sent = resp.Usage.PromptTokens // the provider's count
		}
	}
	if text != nil {
		if streamed := text.close(ctx); err == nil {
			resp.Streamed = streamed
		}
	}
	if activity.IsActivity(ctx) {
		mh := activity.GetMetricsHandler(ctx)
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		mh.WithTags(map[string]string{"model": in.Model, "outcome": outcome}).Timer(protocol.MetricModelLatency).Record(time.Since(start))
		if u := resp.Usage; err == nil && u != nil {
			mh.WithTags(map[string]string{"model": in.Model, "kind": "prompt"}).Counter(protocol.MetricModelTokens).Inc(int64(u.PromptTokens))
			mh.WithTags(map[string]string{"model": in.Model, "kind": "completion"}).Counter(protocol.MetricModelTokens).Inc(int64(u.CompletionTokens))
		}
	}
	if err == nil {
		if err := checkPayload("the model's response", resp, m.PayloadLimit); err != nil {
			return ModelResponse{}, err
		}
		if time.Since(start) >= noteAnswersAfter {
			noteAnswer(resp, note)
		}
	}
	if err == nil && in.Cursor {
		// The workflow adds this response to the conversation as it is;
		// the next call's cursor starts after it, so it enters history
		// once (as this activity's result), not again as the next input.
		m.remember(in, AssistantMessage(resp))
	}
	return resp, err
}

// noteAnswersAfter: an answer that took this long is noted in the
// attempt's heartbeat before the activity returns it, so that a retry (a
// worker lost between the two) does not ask the model again. Quicker
// answers are asked again: the note costs a heartbeat.
const noteAnswersAfter = 2 * time.Second

// maxNotedAnswer bounds an answer kept in a heartbeat.
const maxNotedAnswer = 256 << 10

// modelNote is a model activity's heartbeat details: the answer received.
type modelNote struct {
	Answer *ModelResponse `json:"answer"`
}

func noteAnswer(resp ModelResponse, note func(any)) {
	b, err := json.Marshal(resp)
	if err != nil || len(b) > maxNotedAnswer {
		return
	}
	note(modelNote{Answer: &resp})
}

// notedAnswer is the answer an earlier attempt noted, if any.
func notedAnswer(ctx context.Context) (ModelResponse, bool) {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return ModelResponse{}, false
	}
	var n modelNote
	if activity.GetHeartbeatDetails(ctx, &n) != nil || n.Answer == nil {
		return ModelResponse{}, false
	}
	return *n.Answer, true
}

// AssistantMessage is the conversation's message for a model response.
func AssistantMessage(resp ModelResponse) threadstate.Message {
	return threadstate.Message{Role: "assistant", Content: resp.Text, ToolCalls: resp.ToolCalls}
}

// offeredOnly is the specs named in offered, in their order.
func offeredOnly(specs []protocol.ToolSpec, offered []string) []protocol.ToolSpec {
	out := make([]protocol.ToolSpec, 0, len(offered))
	for _, s := range specs {
		if slices.Contains(offered, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// conversation rebuilds in's whole conversation, checks its digest, and
// fills in the content of served messages that refer to another (ContentIn).
func (m *Models) conversation(ctx context.Context, in ModelInput) ([]threadstate.Message, error) {
	var base *convNode
	if in.Base != nil && in.Base.Count > 0 {
		base = m.Cache.get(in.Base.Digest)
		if base == nil || base.count != in.Base.Count {
			msgs, err := m.fetchBase(ctx, in.Base)
			if err != nil {
				return nil, err
			}
			if d := threadstate.ExtendDigest("", msgs...); d != in.Base.Digest {
				return nil, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("the run's conversation (%d messages) does not match the model call's digest", len(msgs)), protocol.ErrConversation, nil)
			}
			base = newNode(nil, msgs, len(msgs), in.Base.Digest)
			m.Cache.put(base)
		}
	}
	d := ""
	count := 0
	if base != nil {
		d, count = base.digest, base.count
	}
	d = threadstate.ExtendDigest(d, in.New...)
	if d != in.Digest {
		return nil, temporal.NewNonRetryableApplicationError("the model call's new messages do not match its digest", protocol.ErrConversation, nil)
	}
	n := newNode(base, in.New, count+len(in.New), d)
	m.Cache.put(n)
	msgs := n.flatten()
	if err := threadstate.ResolveContent(msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

// remember caches in's conversation followed by the model's answer.
func (m *Models) remember(in ModelInput, answer threadstate.Message) {
	parent := m.Cache.get(in.Digest)
	if parent == nil {
		return
	}
	m.Cache.put(newNode(parent, []threadstate.Message{answer}, parent.count+1, threadstate.ExtendDigest(in.Digest, answer)))
}

// fetchBase reads the first base.Count messages of the calling run's
// conversation from the runs that hold them; a run deleted while this one
// was open (retention) gives its part from the thread store's state, which
// the digest check after it proves the same.
func (m *Models) fetchBase(ctx context.Context, base *Cursor) ([]threadstate.Message, error) {
	info := activity.GetInfo(ctx)
	msgs, err := fetchConversation(ctx, base.Count)
	if err != nil && m.Store != nil {
		if head, serr := m.Store.Load(ctx, threadstate.ThreadRef{ThreadID: info.WorkflowExecution.ID}); serr == nil && head != nil && head.Conversation == nil {
			msgs, err = threadstate.FetchMessagesWithStored(ctx, activity.GetClient(ctx), info.WorkflowExecution.ID, info.WorkflowExecution.RunID, 0, base.Count, head.Messages)
		}
	}
	return msgs, threadstate.Lost(info.WorkflowExecution.ID, err)
}

// fetchConversation reads the first count messages of the calling run's
// conversation: from the run itself, and from the runs that hold its
// earlier parts (QueryPage). Queries add nothing to history.
func fetchConversation(ctx context.Context, count int) ([]threadstate.Message, error) {
	info := activity.GetInfo(ctx)
	return threadstate.FetchMessages(ctx, activity.GetClient(ctx), info.WorkflowExecution.ID, info.WorkflowExecution.RunID, 0, count)
}
