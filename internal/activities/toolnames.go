package activities

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// ToolNames is the one check of a worker's tool names: Go tools and
// toolsets' tools alike must each have a name of their own, valid as a
// tulip tool name. NewToolNames starts it with the worker's Go tools;
// plugin creation (Go tools), the run's tool listing (ListTools) and the
// MCP module's Open (its servers) all check through it.
type ToolNames struct {
	owner map[string]string // name -> toolset ("" for a Go tool)
}

// NewToolNames checks the Go tools' names and returns the check, ready
// for toolsets' tools.
func NewToolNames(goTools ...string) (*ToolNames, error) {
	n := &ToolNames{owner: map[string]string{}}
	for _, name := range goTools {
		if err := n.Add(name, ""); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Add takes tool name from toolset ("" for a Go tool): a *ClashError when
// the name is taken, or a *ClashError with no First owner and Invalid set
// when it is not a valid tool name.
func (n *ToolNames) Add(name, toolset string) error {
	if !toolName.MatchString(name) {
		return &ClashError{Tool: name, Second: toolset, Invalid: true}
	}
	if first, ok := n.owner[name]; ok {
		return &ClashError{Tool: name, First: first, Second: toolset}
	}
	n.owner[name] = toolset
	return nil
}

// ClashError is a tool name a worker cannot take: offered twice (First and
// Second are the toolsets, "" for a Go tool), or invalid.
type ClashError struct {
	Tool          string
	First, Second string
	Invalid       bool
}

func (e *ClashError) Error() string {
	owner := func(s string) string {
		if s == "" {
			return "a Go tool"
		}
		return fmt.Sprintf("toolset %q", s)
	}
	switch {
	case e.Invalid:
		return fmt.Sprintf("%s offers a tool named %q: names are 1-64 letters, digits, '_' or '-'", owner(e.Second), e.Tool)
	case e.First == "" && e.Second == "":
		return fmt.Sprintf("tool %q is declared twice", e.Tool)
	case e.First == "":
		return fmt.Sprintf("tool %q is offered by a Go tool and by %s: give %s a prefix", e.Tool, owner(e.Second), owner(e.Second))
	}
	return fmt.Sprintf("tool %q is offered by %s and by %s: give one of them a prefix", e.Tool, owner(e.First), owner(e.Second))
}

// Failure is the error as a run's failure: non-retryable, type
// ErrToolClash.
func (e *ClashError) Failure() error {
	return temporal.NewNonRetryableApplicationError(e.Error(), ErrToolClash, nil)
}
