package serve

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tulip-temporal/tulip/agent"
)

// The output items of a response. The agent's own calls (its worker's
// tools, MCP tools) are mcp_call items: the Responses API's item for a
// tool the server ran, which frameworks never execute. A call of a client
// tool (one the request's "tools" offered) is a function_call item: the
// client runs it and answers with function_call_output.

// mcpCallItem is one of the agent's own calls, with tulip's outcome (the
// "tulip" extension field, docs/serve.md).
func mcpCallItem(ci agent.CallItem, approval string) map[string]any {
	ext := map[string]any{"outcome": ci.Outcome, "turn": ci.Turn, "call_id": ci.CallID}
	if ci.ServedFrom != nil {
		ext["served_from"] = *ci.ServedFrom
	}
	if ci.Relation != "" {
		ext["relation"] = ci.Relation
	}
	if ci.NearMiss != nil {
		ext["near_miss"] = ci.NearMiss
	}
	if len(ci.Result) > 0 && string(ci.Result) != "null" {
		ext["result"] = ci.Result
	}
	if ci.Error != nil {
		ext["error"] = *ci.Error
	}
	id := "mcp_" + ci.CallID + "_" + string(ci.Outcome)
	if ci.Agent != "" {
		// A sub-agent's call, streamed under the call that ran it: its
		// call ids are its own.
		ext["agent"] = ci.Agent
		id = "mcp_" + strings.NewReplacer("/", "_", " ", "_").Replace(ci.Agent) + "_" + ci.CallID + "_" + string(ci.Outcome)
	}
	args := string(ci.Arguments)
	if args == "" || args == "null" {
		args = "{}"
	}
	item := map[string]any{"type": "mcp_call", "id": id, "server_label": "tulip",
		"name": ci.Tool, "arguments": args, "output": nil, "error": nil, "approval_request_id": nil, "status": "completed", "tulip": ext}
	switch {
	case ci.Outcome == agent.Held:
		item["status"] = "in_progress"
	case ci.Error != nil:
		item["error"] = *ci.Error
		item["status"] = "failed"
	case ci.Outcome == agent.Cancelled || ci.Outcome == agent.Dropped || ci.Outcome == agent.Rejected:
		item["error"] = string(ci.Outcome)
		item["status"] = "failed"
	default:
		item["output"] = outputText(ci.Result)
	}
	if approval != "" {
		item["approval_request_id"] = approval
	}
	return item
}

// outputText is a result as the output text of an item: a JSON string's
// text, any other JSON as it is.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 {
		return ""
	}
	return string(raw)
}

// functionCallItem is a client tool's call, for the client to run; its
// call_id is an authenticated call id.
func functionCallItem(callID, name, args string) map[string]any {
	if args == "" {
		args = "{}"
	}
	return map[string]any{"type": "function_call", "id": "fc_" + callID[len(idCall):min(len(callID), len(idCall)+24)],
		"call_id": callID, "name": name, "arguments": args, "status": "completed"}
}

func messageItem(id, text, status string) map[string]any {
	content := []any{}
	if status == "completed" || text != "" {
		content = append(content, map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}})
	}
	return map[string]any{"type": "message", "id": id, "role": "assistant", "status": status, "content": content}
}

// approvalItem asks for an interrupt's answer: an mcp_approval_request
// whose id names the interrupt (id: an authenticated approval id, or the
// interrupt's own id), with the held calls (docs/serve.md).
func approvalItem(id string, in *agent.Interrupt) map[string]any {
	var held []map[string]any
	name, args := "", "{}"
	for i, c := range in.Held {
		held = append(held, map[string]any{"call_id": c.ID, "name": c.Name, "arguments": c.Arguments})
		if i == 0 {
			name, args = c.Name, c.Arguments
		}
	}
	return map[string]any{"type": "mcp_approval_request", "id": id, "server_label": "tulip", "name": name, "arguments": args,
		"tulip": map[string]any{"hook": in.Hook, "reason": in.Reason, "turn": in.Turn, "held": held, "interrupt_id": in.ID}}
}

// tokens are a response's token counts.
type tokens struct{ in, out, cached int64 }

// responsesUsage is the Responses API's usage object.
func (t tokens) responsesUsage() map[string]any {
	return map[string]any{"input_tokens": t.in, "output_tokens": t.out, "total_tokens": t.in + t.out,
		"input_tokens_details": map[string]any{"cached_tokens": t.cached}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
}

// chatUsage is Chat Completions' usage object.
func (t tokens) chatUsage() map[string]any {
	return map[string]any{"prompt_tokens": t.in, "completion_tokens": t.out, "total_tokens": t.in + t.out,
		"prompt_tokens_details": map[string]any{"cached_tokens": t.cached}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
}

func (t tokens) String() string { return fmt.Sprintf("%d in, %d out", t.in, t.out) }
