package activities

import (
	"encoding/json"
	"fmt"

	"github.com/tulip-temporal/tulip/internal/protocol"
)

// SubAgent is what a sub-agent tool runs (NewAgentTool): another agent
// run, as a child workflow of the run that calls it, on its own thread.
type SubAgent struct {
	// Agent names the child's agent. Zero value: the tool's name.
	Agent string `json:"agent,omitempty"`
	// Model names a model registered on the child's workers. Zero value:
	// the calling run's model.
	Model string `json:"model,omitempty"`
	// TaskQueue runs the child on other workers. Zero value: the calling
	// run's task queue.
	TaskQueue string `json:"task_queue,omitempty"`
	// Instructions are the child's instructions (its RunInput's).
	Instructions string `json:"instructions,omitempty"`
	// Hooks are installed in the child at its start.
	Hooks []string `json:"hooks,omitempty"`
	// Tools names the worker tools and toolsets the child is offered
	// (RunInput.Tools). Zero value: every tool of its worker but itself.
	Tools []string `json:"tools,omitempty"`
	// MaxTurns bounds the child's model responses. Zero value: 32.
	MaxTurns int `json:"max_turns,omitempty"`
}

// SubAgentParameters are a sub-agent tool's arguments: the task.
var SubAgentParameters = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"the task for the sub-agent, in full"}},"required":["task"]}`)

// SubAgentArgs are a sub-agent call's arguments.
type SubAgentArgs struct {
	Task string `json:"task"`
}

// SubAgentResult is a sub-agent call's result: the child's answer, and
// the thread that holds its conversation and log.
type SubAgentResult struct {
	Answer string `json:"answer"`
	Thread string `json:"thread"`
	Turns  int    `json:"turns"`
}

// NewAgentTool declares a tool whose body is another agent run (sub):
// the model calls it with a task, and the calling run starts a child
// workflow that runs sub on the thread PARENT_THREAD/sub/NAME. It has no
// activity. spec's Parameters, Local and OnUnknown must be unset.
func NewAgentTool(spec protocol.ToolSpec, sub SubAgent) (*Tool, error) {
	if !toolName.MatchString(spec.Name) {
		return nil, fmt.Errorf("tulip: tool name %q must be 1-64 letters, digits, '_' or '-'", spec.Name)
	}
	if len(spec.Parameters) > 0 || spec.Local || spec.OnUnknown != "" || spec.KeyTemplate != "" {
		return nil, fmt.Errorf("tulip: sub-agent tool %q: Parameters, Local, OnUnknown and KeyTemplate are the tool's own (leave them unset)", spec.Name)
	}
	if sub.MaxTurns < 0 {
		return nil, fmt.Errorf("tulip: sub-agent tool %q: MaxTurns %d is negative", spec.Name, sub.MaxTurns)
	}
	if sub.Agent == "" {
		sub.Agent = spec.Name
	}
	spec.Parameters = SubAgentParameters
	return &Tool{spec: spec, activity: protocol.ToolActivityName(spec.Name), sub: &sub}, nil
}

// SubAgent is what a sub-agent tool runs, or nil for any other tool.
func (t *Tool) SubAgent() *SubAgent { return t.sub }
