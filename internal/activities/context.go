package activities

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// SummarizeActivity asks a run's model for a summary of the conversation's
// oldest messages (compaction, docs/context.md).
const SummarizeActivity = "tulip.Summarize"

// ErrContextTooLong: a model call would send more than the model takes
// (its budget, or the provider said so). Non-retryable: the run compacts
// and asks again, once.
const ErrContextTooLong = "tulip.ContextTooLong"

// Compaction is what a model is sent in place of the conversation's first
// Upto messages: Summary, as one user message. The thread keeps every
// message; only the model's view is compacted.
type Compaction struct {
	Upto    int    `json:"upto"`
	Summary string `json:"summary"`
}

// summaryLead introduces a summary in the model's view.
const summaryLead = "[The conversation so far, summarized: its earlier messages are not shown.]\n"

// view is msgs as the model is sent them: the summary, then the messages
// from Upto on.
func (c *Compaction) view(msgs []threadstate.Message) ([]threadstate.Message, error) {
	if c.Upto < 0 || c.Upto > len(msgs) {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("compaction: it replaces %d messages of %d", c.Upto, len(msgs)), protocol.ErrConversation, nil)
	}
	out := make([]threadstate.Message, 0, len(msgs)-c.Upto+1)
	out = append(out, threadstate.Message{Role: "user", Content: summaryLead + c.Summary})
	return append(out, msgs[c.Upto:]...), nil
}

// ContextReport is a model call's measure: the budget in force (0: none)
// and the tokens the request sent (the provider's count when it reported
// one, else EstimateTokens).
type ContextReport struct {
	Budget int `json:"budget,omitempty"`
	Sent   int `json:"sent"`
}

// EstimateTokens estimates the input tokens of a request: its text's
// bytes / 4 (messages, tool calls, tool schemas, instructions), the
// figure docs/context.md measures against real tokenizers.
func EstimateTokens(req *ModelRequest) int {
	n := len(req.Instructions)
	for i := range req.Messages {
		n += MessageBytes(&req.Messages[i])
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return (n + 3) / 4
}

// MessageBytes is a message's text, as EstimateTokens counts it.
func MessageBytes(m *threadstate.Message) int {
	n := len(m.Content) + 8
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments) + 8
	}
	return n
}

// tooLong is the ContextTooLong failure of a request of sent tokens to a
// model whose budget is budget.
func tooLong(model string, sent, budget int, provider string) error {
	msg := fmt.Sprintf("model %s: the request is %d tokens, over its context budget of %d", model, sent, budget)
	if provider != "" {
		msg = fmt.Sprintf("model %s: the provider says the request is too long: %s", model, provider)
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrContextTooLong, nil, ContextReport{Budget: budget, Sent: sent})
}

// SummarizeInput asks for a summary of the conversation's messages
// [From, Upto), after Previous (the summary of the messages before From).
// Conversation is the run's cursor, as a model call's input carries it.
type SummarizeInput struct {
	Conversation ModelInput `json:"conversation"`
	From         int        `json:"from"`
	Upto         int        `json:"upto"`
	Previous     string     `json:"previous,omitempty"`
	// Budget is the model's budget as the run knows it (the worker's, or
	// learned from a refusal); 0: the worker's.
	Budget int `json:"budget,omitempty"`
}

// SummarizeOutput is the summary and what asking for it cost.
type SummarizeOutput struct {
	Summary string             `json:"summary"`
	Usage   *threadstate.Usage `json:"usage,omitempty"`
}

// SummaryInstructions are the instructions of a summary request.
const SummaryInstructions = "Summarize the conversation below for the assistant that continues it: the user's requests and facts, " +
	"decisions made, tool calls made and what they returned (ids, amounts, outcomes), and what is still to do. " +
	"Be complete and brief; answer with the summary alone."

// Summarize is the SummarizeActivity function: the messages to summarize,
// rendered as one user message (tool calls and results as text), sent to
// the run's model with Summary set.
func (m *Models) Summarize(ctx context.Context, in SummarizeInput) (SummarizeOutput, error) {
	model, ok := m.ByName[in.Conversation.Model]
	if !ok {
		return SummarizeOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no model named %q on this worker", in.Conversation.Model), protocol.ErrUnknownModel, nil)
	}
	ctx, stop := heartbeat(ctx)
	defer stop()
	msgs := in.Conversation.Messages
	if in.Conversation.Cursor {
		var err error
		if msgs, err = m.conversation(ctx, in.Conversation); err != nil {
			return SummarizeOutput{}, err
		}
	}
	if in.From < 0 || in.From > in.Upto || in.Upto > len(msgs) {
		return SummarizeOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("summary of messages [%d, %d) of %d", in.From, in.Upto, len(msgs)), protocol.ErrConversation, nil)
	}
	// The messages as text, in pieces that each fit half the model's
	// budget with the summary so far: a long stretch is summarized piece
	// by piece, each summary folding the one before.
	var pieces []string
	var b strings.Builder
	budget := in.Budget
	if budget <= 0 {
		budget = m.Budgets[in.Conversation.Model]
	}
	limit := budget * 4 / 2 // bytes
	for _, msg := range msgs[in.From:in.Upto] {
		line := renderForSummary(msg)
		if limit > 0 && len(line) > limit/2 {
			line = line[:limit/2] + " [... clipped for the summary]\n" // one message alone fits
		}
		if limit > 0 && b.Len() > 0 && b.Len()+len(line)+len(in.Previous) > limit {
			pieces, b = append(pieces, b.String()), strings.Builder{}
		}
		b.WriteString(line)
	}
	pieces = append(pieces, b.String())
	c := in.Conversation
	summary := in.Previous
	var usage *threadstate.Usage
	for _, piece := range pieces {
		text := piece
		if summary != "" {
			text = "Summary of what came before:\n" + summary + "\n\nThen:\n" + piece
		}
		req := ModelRequest{Model: c.Model, Agent: c.Agent, Thread: c.Thread, Turn: c.Turn, Phase: c.Phase, PhaseTurn: c.PhaseTurn,
			Messages: []threadstate.Message{{Role: "user", Content: text}}, Tools: []protocol.ToolSpec{}, Instructions: SummaryInstructions, Summary: true}
		resp, err := model.Respond(ctx, req)
		if err != nil {
			return SummarizeOutput{}, err
		}
		if len(resp.ToolCalls) > 0 || strings.TrimSpace(resp.Text) == "" {
			return SummarizeOutput{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("model %s answered a summary request with %d tool calls and %d bytes of text: a summary is text", c.Model, len(resp.ToolCalls), len(resp.Text)),
				protocol.ErrBadInput, nil)
		}
		summary, usage = resp.Text, usage.Add(resp.Usage)
	}
	return SummarizeOutput{Summary: summary, Usage: usage}, nil
}

// renderForSummary is a message as a line of a summary request's text.
func renderForSummary(msg threadstate.Message) string {
	var b strings.Builder
	switch {
	case msg.Role == "tool":
		fmt.Fprintf(&b, "tool result (%s): %s\n", msg.ToolCallID, msg.Content)
	case len(msg.ToolCalls) > 0:
		if msg.Content != "" {
			fmt.Fprintf(&b, "%s: %s\n", msg.Role, msg.Content)
		}
		for _, c := range msg.ToolCalls {
			fmt.Fprintf(&b, "%s called %s (%s) with %s\n", msg.Role, c.Name, c.ID, c.Arguments)
		}
	default:
		fmt.Fprintf(&b, "%s: %s\n", msg.Role, msg.Content)
	}
	return b.String()
}
