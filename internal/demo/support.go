package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// SupportModelName is the name 'tulip dev' serves SupportModel under.
const SupportModelName = "support"

// SupportKeywords says what SupportModel does with a message, for docs and
// start-up lines ("refund order ord-N" and "lookup order ord-N" work too).
const SupportKeywords = `"refund ord-N [AMOUNT]", "lookup ord-N", "isolate HOST", "page CASE", "deploy SERVICE VERSION", "mint"`

var (
	refundRe = regexp.MustCompile(`(?i)\brefund\s+(?:order\s+)?(ord-[\w-]+)(?:\s+(\d+(?:\.\d+)?))?`)
	lookupRe = regexp.MustCompile(`(?i)\blookup\s+(?:order\s+)?(ord-[\w-]+)`)
	isolate  = regexp.MustCompile(`(?i)\bisolate\s+([\w.-]+)`)
	pageRe   = regexp.MustCompile(`(?i)\bpage\s+([\w.-]+)`)
	deployRe = regexp.MustCompile(`(?i)\bdeploy\s+([\w.-]+)\s+([\w.-]+)`)
	mintRe   = regexp.MustCompile(`(?i)\bmint\b`)
)

// SupportModel is a demo model that acts on what the user's message asks
// (no LLM): in its first turn after a user message it calls a demo tool for
// each request it finds, in the order of SupportKeywords ("refund ord-4821"
// calls issue_refund with amount 120.0 unless one is given), and then
// answers with what the tools returned. A message it finds nothing in gets
// an answer that says what it understands. Runs on one thread see each
// other's calls, so a refund asked again in a later run is served from the
// log.
func SupportModel() activities.Model {
	return activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		last := -1
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if req.Messages[i].Role == "user" {
				last = i
				break
			}
		}
		if last < 0 {
			return activities.ModelResponse{Text: "Say what you need: " + SupportKeywords + "."}, nil
		}
		if last < len(req.Messages)-1 {
			return activities.ModelResponse{Text: summarize(req.Messages[last+1:])}, nil
		}
		calls := supportCalls(req.Messages[last].Content, fmt.Sprintf("call_%d", len(req.Messages)))
		if len(calls) > 0 {
			return activities.ModelResponse{ToolCalls: calls}, nil
		}
		if last > 0 && req.Messages[last-1].Role == "tool" {
			// A resume's answer after the held calls it performed (or
			// dropped): say what they came to.
			from := last - 1
			for from > 0 && req.Messages[from-1].Role == "tool" {
				from--
			}
			return activities.ModelResponse{Text: summarize(req.Messages[from:last])}, nil
		}
		return activities.ModelResponse{Text: "I can act on " + SupportKeywords + "; I found none of them in your message."}, nil
	})
}

func supportCalls(msg, prefix string) []threadstate.ToolCall {
	var calls []threadstate.ToolCall
	add := func(tool string, args map[string]any) {
		b, _ := json.Marshal(args)
		calls = append(calls, threadstate.ToolCall{ID: fmt.Sprintf("%s_%d", prefix, len(calls)+1), Name: tool, Arguments: string(b)})
	}
	for _, m := range refundRe.FindAllStringSubmatch(msg, -1) {
		amount := json.Number("120.0")
		if m[2] != "" {
			amount = json.Number(m[2])
		}
		add("issue_refund", map[string]any{"order_id": m[1], "amount": amount})
	}
	for _, m := range lookupRe.FindAllStringSubmatch(msg, -1) {
		add("lookup_order", map[string]any{"order_id": m[1]})
	}
	for _, m := range isolate.FindAllStringSubmatch(msg, -1) {
		add("isolate_host", map[string]any{"host": m[1]})
	}
	for _, m := range pageRe.FindAllStringSubmatch(msg, -1) {
		add("page_oncall", map[string]any{"case_id": m[1], "summary": msg})
	}
	for _, m := range deployRe.FindAllStringSubmatch(msg, -1) {
		add("deploy_service", map[string]any{"service": m[1], "version": m[2]})
	}
	if mintRe.MatchString(msg) {
		add("mint_case_id", map[string]any{})
	}
	return calls
}

// summarize is the answer after the tools: each result, in order.
func summarize(msgs []threadstate.Message) string {
	var parts []string
	for _, m := range msgs {
		if m.Role != "tool" {
			continue
		}
		s := m.Content
		if m.Served {
			s += " (served from the log: the tool did not run again)"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "Done."
	}
	return "Done: " + strings.Join(parts, "; ")
}
