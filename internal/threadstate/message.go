package threadstate

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
	// ContentIn, on a served tool message, says its content is that of the
	// conversation's message number ContentIn (counted from 0 across the
	// thread's runs): a result another run holds. Readers (the model
	// activity) put that content in Content; a Model never sees it.
	ContentIn *int `json:"content_in,omitempty"`
}

// Usage is a model response's token counts (a run's result sums them).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens are the prompt tokens read from the provider's prompt
	// cache (part of PromptTokens), when it reports them.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Add adds u's counts to s (u nil: nothing) and returns s, made when nil
// and u is not.
func (s *Usage) Add(u *Usage) *Usage {
	if u == nil {
		return s
	}
	if s == nil {
		s = &Usage{}
	}
	s.PromptTokens += u.PromptTokens
	s.CompletionTokens += u.CompletionTokens
	s.CachedTokens += u.CachedTokens
	return s
}

// Plus is s and u summed in a new Usage (nil when both are nil): neither
// changes.
func (s *Usage) Plus(u *Usage) *Usage {
	if s == nil && u == nil {
		return nil
	}
	var out Usage
	return out.Add(s).Add(u)
}

// CloneUsage is a copy of m whose counts m does not share (nil for none).
func CloneUsage(m map[string]*Usage) map[string]*Usage {
	if m == nil {
		return nil
	}
	out := make(map[string]*Usage, len(m))
	for k, u := range m {
		out[k] = u.Plus(nil)
	}
	return out
}
