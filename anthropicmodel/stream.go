package anthropicmodel

import (
	"sort"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

// readStream assembles a streamed message (server-sent events:
// message_start, then per content block content_block_start, its deltas and
// content_block_stop, then message_delta and message_stop), passing each
// text_delta to onText as it arrives. A tool_use block's input is the
// concatenation of its input_json_delta pieces. The response is the whole
// text and the assembled calls, as a plain message would have given them.
func readStream(stream *ssestream.Stream[anthropic.MessageStreamEventUnion], onText func(string)) (tulip.ModelResponse, error) {
	type block struct {
		typ, id, name string
		input         strings.Builder
		deltas        bool
	}
	blocks := map[int64]*block{}
	var text strings.Builder
	var u anthropic.Usage
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			u = ev.Message.Usage
		case "content_block_start":
			blocks[ev.Index] = &block{typ: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			if ev.ContentBlock.Type == "text" && ev.ContentBlock.Text != "" {
				text.WriteString(ev.ContentBlock.Text)
				onText(ev.ContentBlock.Text)
			}
		case "content_block_delta":
			b := blocks[ev.Index]
			if b == nil {
				return tulip.ModelResponse{}, badResponse("a delta for block %d, which did not start", ev.Index)
			}
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" {
					text.WriteString(ev.Delta.Text)
					onText(ev.Delta.Text)
				}
			case "input_json_delta":
				b.input.WriteString(ev.Delta.PartialJSON)
				b.deltas = true
			}
		case "message_delta":
			// Counts here are cumulative; a zero means "not sent".
			d := ev.Usage
			if d.OutputTokens > 0 {
				u.OutputTokens = d.OutputTokens
			}
			if d.InputTokens > 0 {
				u.InputTokens = d.InputTokens
			}
			if d.CacheReadInputTokens > 0 {
				u.CacheReadInputTokens = d.CacheReadInputTokens
			}
			if d.CacheCreationInputTokens > 0 {
				u.CacheCreationInputTokens = d.CacheCreationInputTokens
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return tulip.ModelResponse{}, classify(err)
	}
	if !stopped {
		return tulip.ModelResponse{}, temporal.NewApplicationError("anthropic: the stream ended before message_stop", ErrRetryable)
	}
	out := tulip.ModelResponse{Text: text.String(), Usage: usage(u)}
	idx := make([]int64, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		b := blocks[i]
		if b.typ != "tool_use" {
			continue
		}
		if b.id == "" || b.name == "" {
			return tulip.ModelResponse{}, badResponse("streamed tool_use block %d has no id or no name", i)
		}
		args := strings.TrimSpace(b.input.String())
		if !b.deltas || args == "" {
			args = "{}"
		}
		out.ToolCalls = append(out.ToolCalls, tulip.ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	return out, nil
}
