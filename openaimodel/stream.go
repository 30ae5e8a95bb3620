package openaimodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

// A streamed completion (stream: true): server-sent events, each "data:"
// line a chunk whose choices[0].delta holds a piece of the text and pieces
// of tool calls (by index: the id and name once, the argument text in
// pieces), then "data: [DONE]".
type wireChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// maxStream bounds a streamed completion, as the body of a plain one.
const maxStream = 32 << 20

// readStream assembles a streamed completion, passing each piece of text
// to onText as it arrives; the response is the whole text and the
// assembled calls, as a plain completion would have given them.
func readStream(body io.Reader, onText func(string)) (tulip.ModelResponse, error) {
	type call struct {
		id, name string
		args     strings.Builder
	}
	calls := map[int]*call{}
	var text strings.Builder
	var out tulip.ModelResponse
	sc := bufio.NewScanner(io.LimitReader(body, maxStream))
	sc.Buffer(make([]byte, 0, 64<<10), maxStream)
	done := false
	for !done && sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue // comments, event names, blank separators
		}
		data := bytes.TrimSpace(line[len("data:"):])
		if string(data) == "[DONE]" {
			done = true
			break
		}
		var ch wireChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return tulip.ModelResponse{}, badResponse("stream chunk: %v: %s", err, clip(string(data), 200))
		}
		if ch.Error != nil {
			return tulip.ModelResponse{}, temporal.NewApplicationError("openai: the stream failed: "+clip(ch.Error.Message, 300), ErrRetryable)
		}
		if ch.Usage != nil {
			out.Usage = ch.Usage.usage()
		}
		if len(ch.Choices) == 0 {
			continue
		}
		d := ch.Choices[0].Delta
		if d.Content != nil && *d.Content != "" {
			text.WriteString(*d.Content)
			onText(*d.Content)
		}
		for _, tc := range d.ToolCalls {
			c := calls[tc.Index]
			if c == nil {
				c = &call{}
				calls[tc.Index] = c
			}
			if tc.ID != "" {
				c.id = tc.ID
			}
			c.name += tc.Function.Name
			c.args.WriteString(tc.Function.Arguments)
		}
	}
	if err := sc.Err(); err != nil {
		return tulip.ModelResponse{}, temporal.NewApplicationErrorWithCause("openai: reading the stream: "+err.Error(), ErrRetryable, err)
	}
	if !done {
		return tulip.ModelResponse{}, temporal.NewApplicationError("openai: the stream ended before [DONE]", ErrRetryable)
	}
	out.Text = text.String()
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		c := calls[i]
		if c.id == "" || c.name == "" {
			return tulip.ModelResponse{}, badResponse("streamed tool call %d has no id or no function name", i)
		}
		out.ToolCalls = append(out.ToolCalls, tulip.ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
	}
	return out, nil
}
