package tulip

import (
	"context"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Model produces an agent's responses. It runs in an activity, so it may
// do I/O; Temporal retries its retryable errors. Package openaimodel is one
// for OpenAI-compatible endpoints; docs/models.md shows how to write one.
type Model interface {
	Respond(ctx context.Context, req ModelRequest) (ModelResponse, error)
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req ModelRequest) (ModelResponse, error)

// Respond calls f.
func (f ModelFunc) Respond(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	return f(ctx, req)
}

// ModelRequest is what a model is asked for its next response: the whole
// conversation (as Options.Conversation chooses it) and the tools it may
// call.
type ModelRequest struct {
	// Model is the name the run asked for (agent.Options.Model).
	Model string `json:"model"`
	// Agent and Thread are the run's ("" for the default agent, or for a
	// run on no thread).
	Agent  string `json:"agent"`
	Thread string `json:"thread,omitempty"`
	// Turn is the 1-based model response of this run, resumed turns
	// included (it keeps counting across resumes and continue-as-new).
	Turn int `json:"turn"`
	// Phase counts the resumes before this turn that answered a hook's
	// interrupt (a person's answer; not client tools' results nor an
	// answer about a held unknown outcome); PhaseTurn is the 1-based turn
	// within the phase. Scripted models use them.
	Phase     int `json:"phase"`
	PhaseTurn int `json:"phase_turn"`
	// Messages is the conversation so far: the thread's earlier runs, then
	// this run's.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call: the worker's, then the run's
	// client tools (agent.Options.ClientTools), which the caller runs.
	Tools []ToolSpec `json:"tools"`
	// Instructions are the run's own instructions (agent.Options.
	// Instructions): send them as the system prompt, after the model's
	// own ("" none).
	Instructions string `json:"instructions,omitempty"`
	// Params are the run's sampling parameters, each sent when set, over
	// the model's own. Nil: none.
	Params *ModelParams `json:"params,omitempty"`
	// Summary: the run asks for a summary of Messages, to send in their
	// place from now on (compaction, docs/context.md). Answer with text
	// and no tool calls; Tools is empty.
	Summary bool `json:"summary,omitempty"`
	// OnText, when set, takes the answer as the model generates it: a
	// model that can stream calls it with each piece of text, in order
	// (the whole text still goes in the response). Nil when the run does
	// not stream text.
	OnText func(delta string) `json:"-"`
}

// ModelResponse is a model's answer: text, tool calls, or both. No tool
// calls means a final answer.
type ModelResponse struct {
	// Text is the answer's text.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls the model asks for, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// InstallHooks and RemoveHooks change the run's hooks (by their
	// Options.Hooks names) before this response's calls are handled
	// (scripted models use them).
	InstallHooks []string `json:"install_hooks,omitempty"`
	RemoveHooks  []string `json:"remove_hooks,omitempty"`
	// Usage is the tokens the model reports for this response, if any.
	Usage *Usage `json:"usage,omitempty"`
}

// Message is one message of a thread's conversation.
type Message struct {
	// Role is "user", "assistant" or "tool".
	Role string `json:"role"`
	// Content is the message's text (a tool message's: the call's result).
	Content string `json:"content,omitempty"`
	// ToolCalls are an assistant message's calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Served says a tool message's result was served from the execution
	// log: the body did not run for this call.
	Served bool `json:"served,omitempty"`
}

// ToolCall is one tool call as the model emitted it.
type ToolCall struct {
	// ID is the model's tool-call id.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is the argument text exactly as the model emitted it.
	Arguments string `json:"arguments"`
}

// ConversationPolicy chooses what a model is shown of the conversation
// (LastTurns, say). It runs on the worker, in the model activity: it never
// changes what the run holds, what the logs hold, or how calls match.
type ConversationPolicy func(messages []Message) []Message

// LastTurns shows the model the last n user messages and everything after
// the first of them (n <= 0: everything).
func LastTurns(n int) ConversationPolicy {
	return func(msgs []Message) []Message {
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

// Usage is a model response's token counts; a run's result sums them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens are the prompt tokens read from the provider's prompt
	// cache (part of PromptTokens), when it reports them.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// ModelParams are a run's sampling parameters (agent.Options.Params): each,
// when set, is sent to the model in place of the model's own setting.
type ModelParams struct {
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	MaxOutputTokens *int     `json:"max_output_tokens,omitempty"`
}

// model adapts a Model to the model activity's, converting its request
// and response field by field (once per model response).
type model struct{ m Model }

func (a model) Respond(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
	resp, err := a.m.Respond(ctx, ModelRequest{Model: req.Model, Agent: req.Agent, Thread: req.Thread,
		Turn: req.Turn, Phase: req.Phase, PhaseTurn: req.PhaseTurn, Messages: publicMessages(req.Messages),
		Tools: publicSpecs(req.Tools), Instructions: req.Instructions, Params: (*ModelParams)(req.Params), Summary: req.Summary, OnText: req.OnText})
	return activities.ModelResponse{Text: resp.Text, ToolCalls: internalCalls(resp.ToolCalls),
		InstallHooks: resp.InstallHooks, RemoveHooks: resp.RemoveHooks, Usage: (*threadstate.Usage)(resp.Usage)}, err
}

// policy adapts a ConversationPolicy to the model activity's.
func policy(p ConversationPolicy) activities.ConversationPolicy {
	if p == nil {
		return nil
	}
	return func(msgs []threadstate.Message) []threadstate.Message {
		pub := p(publicMessages(msgs))
		out := make([]threadstate.Message, len(pub))
		for i, m := range pub {
			out[i] = threadstate.Message{Role: m.Role, Content: m.Content, ToolCalls: internalCalls(m.ToolCalls),
				ToolCallID: m.ToolCallID, Served: m.Served}
		}
		return out
	}
}

func publicMessages(msgs []threadstate.Message) []Message {
	if msgs == nil {
		return nil
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = Message{Role: m.Role, Content: m.Content, ToolCalls: publicCalls(m.ToolCalls),
			ToolCallID: m.ToolCallID, Served: m.Served}
	}
	return out
}

func publicCalls(calls []threadstate.ToolCall) []ToolCall {
	if calls == nil {
		return nil
	}
	out := make([]ToolCall, len(calls))
	for i, c := range calls {
		out[i] = ToolCall(c)
	}
	return out
}

func internalCalls(calls []ToolCall) []threadstate.ToolCall {
	if calls == nil {
		return nil
	}
	out := make([]threadstate.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = threadstate.ToolCall(c)
	}
	return out
}

func init() {
	// The CLI and the module's tests build workers from internal options;
	// this is how they take a tulip.Model (an openaimodel.Model, say).
	activities.PublicModel = func(m any) activities.Model {
		if im, ok := m.(activities.Model); ok {
			return im // an internal model (a scripted one)
		}
		return model{m.(Model)}
	}
}
