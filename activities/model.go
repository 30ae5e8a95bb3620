package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// ToolCall is one tool call a model emitted.
type ToolCall struct {
	// ID is the model's tool-call id.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is the argument text exactly as the model emitted it.
	Arguments string `json:"arguments"`
}

// Message is one entry of the conversation sent to the model.
type Message struct {
	// Role is "user", "assistant" or "tool".
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are an assistant message's calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Served says a tool message's result was served from the execution
	// log; the body did not run for this call.
	Served bool `json:"served,omitempty"`
}

// ModelRequest asks a model for its next response.
type ModelRequest struct {
	// Model selects a model registered on the worker.
	Model  string `json:"model"`
	Agent  string `json:"agent"`
	Thread string `json:"thread,omitempty"`
	// Turn is the 1-based model response of this run, resumed turns
	// included.
	Turn int `json:"turn"`
	// Phase counts the resumes before this turn; PhaseTurn is the 1-based
	// turn within the phase. Scripted models use them.
	Phase     int `json:"phase"`
	PhaseTurn int `json:"phase_turn"`
	// Messages is the whole conversation so far.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call.
	Tools []ToolSpec `json:"tools"`
}

// ModelResponse is one model turn. No tool calls means a final answer.
type ModelResponse struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// InstallHooks and RemoveHooks change the run's before-hooks before
	// this response's calls are handled (scripted scenarios use them).
	InstallHooks []string `json:"install_hooks,omitempty"`
	RemoveHooks  []string `json:"remove_hooks,omitempty"`
}

// Model produces an agent's responses. It runs in an activity, so it may
// do I/O; Temporal retries its retryable errors.
type Model interface {
	Respond(ctx context.Context, req ModelRequest) (ModelResponse, error)
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req ModelRequest) (ModelResponse, error)

// Respond calls f.
func (f ModelFunc) Respond(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	return f(ctx, req)
}

// Models is the model activity: it routes a request to the model named in
// it.
type Models map[string]Model

// Respond is the ModelActivity function.
func (m Models) Respond(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	model, ok := m[req.Model]
	if !ok {
		return ModelResponse{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no model named %q on this worker", req.Model), ErrUnknownModel, nil)
	}
	return model.Respond(ctx, req)
}
