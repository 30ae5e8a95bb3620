package tulip

import "github.com/tulip-temporal/tulip/internal/activities"

// Model produces an agent's responses. It runs in an activity, so it may
// do I/O; Temporal retries its retryable errors. Package openaimodel is one
// for OpenAI-compatible endpoints; docs/models.md shows how to write one.
type Model = activities.Model

// ModelFunc adapts a function to Model.
type ModelFunc = activities.ModelFunc

// ModelRequest is what a model is asked: the agent, the conversation (as
// Options.Conversation chooses it) and the tools it may call.
type ModelRequest = activities.ModelRequest

// ModelResponse is a model's answer: text, tool calls, or both.
type ModelResponse = activities.ModelResponse

// Message is one message of a thread's conversation.
type Message = activities.Message

// ToolCall is one tool call as the model emitted it: its id, tool name and
// argument text.
type ToolCall = activities.ToolCall

// ConversationPolicy chooses what a model is shown of the conversation
// (LastTurns, say). It never changes what the log holds or how calls
// match.
type ConversationPolicy = activities.ConversationPolicy

// LastTurns shows the model the conversation's last n turns.
func LastTurns(n int) ConversationPolicy { return activities.LastTurns(n) }

// Usage is a model response's token counts; a run's result sums them.
type Usage = activities.Usage

// ModelParams are a run's sampling parameters (agent.Options.Params):
// Temperature, TopP, MaxOutputTokens, each sent when set.
type ModelParams = activities.ModelParams
