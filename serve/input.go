package serve

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A request's input: the items of the Responses API as clients and
// frameworks send them (a new message, an approval's answer, client tools'
// results, the conversation resent), read into what the request asks of
// its thread.

// responsesRequest is the part of a Responses API request tulip reads;
// other fields are accepted and ignored (docs/serve.md, "Limits").
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	PreviousResponseID string            `json:"previous_response_id"`
	Stream             bool              `json:"stream"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Store              *bool             `json:"store"`
	Metadata           map[string]any    `json:"metadata"`
	// Truncation: "auto" (tulip serve's default) compacts the model's view
	// of a long thread (docs/context.md); "disabled" never does, and a
	// conversation over the model's budget is refused with 400
	// context_length_exceeded.
	Truncation *string `json:"truncation"`
}

// inputItem is a Responses API input item: a message, an answer to an
// approval request (mcp_approval_response), a client tool's output
// (function_call_output), or an item a client sends back from an earlier
// response (function_call, mcp_call, reasoning, item_reference), which the
// thread holds already.
type inputItem struct {
	Type              string          `json:"type"`
	Role              string          `json:"role"`
	Content           json.RawMessage `json:"content"`
	ApprovalRequestID string          `json:"approval_request_id"`
	Approve           *bool           `json:"approve"`
	Reason            string          `json:"reason"`
	CallID            string          `json:"call_id"`
	Output            json.RawMessage `json:"output"`
	ID                string          `json:"id"`
}

// contentText reads a message's content: a string, or parts with text.
func contentText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "input_text" && p.Type != "text" && p.Type != "output_text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// turnInput is what a request asks of its thread: a new user message, an
// approval's answer, or client tools' results.
type turnInput struct {
	message  string
	approval *inputItem
	results  []clientResult
	// target is the run the results answer (from their call ids).
	target *respID
	// interrupt is the interrupt the approval answers.
	interrupt string
	// earlier: the input resends items of earlier turns (history, as a
	// framework sends it when it does not use previous_response_id).
	earlier bool
	// continues is the response the resent history ends with, read from
	// the last earlier item whose id this server made (an answer's
	// message, an item_reference to it, a client tool's call): nil when
	// no earlier item names one.
	continues *respID
}

// clientResult is one client tool's output, for the call its id names.
type clientResult struct {
	call   respID // the authenticated call id, read
	output string
	param  string
}

// echoed are the item types a client sends back from earlier responses:
// the thread holds them already, so a request that answers its run (or
// adds a message) ignores them.
var echoed = []string{"function_call", "mcp_call", "mcp_approval_request", "mcp_list_tools", "reasoning", "item_reference"}

// readInput reads a request's input items: the new user message (the
// user messages after the last item the thread already holds), or an
// approval answer, or client tool outputs; and, when the input resends
// earlier turns, the response they end with.
func (a *apiServer) readInput(tenant string, raw json.RawMessage) (turnInput, string, string) {
	var in turnInput
	var s string
	if len(raw) == 0 || string(raw) == "null" {
		return in, "input", "input is required"
	}
	if json.Unmarshal(raw, &s) == nil {
		in.message = s
		return in, "", ""
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return in, "input", "input is a string or a list of input items"
	}
	if len(items) > maxInputItems {
		return in, "input", fmt.Sprintf("input holds at most %d items, not %d", maxInputItems, len(items))
	}
	var users []string
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch {
		case it.Type == "mcp_approval_response":
			if it.ApprovalRequestID == "" || it.Approve == nil {
				return in, param, "an mcp_approval_response needs approval_request_id and approve"
			}
			in.approval, in.target, in.results, users = &items[i], nil, nil, nil
			if id, ok := a.ids.decode(idApproval, tenant, it.ApprovalRequestID); ok {
				in.interrupt = id.Call
				id.Call = ""
				in.target = &id
			} else {
				in.interrupt = it.ApprovalRequestID
			}
		case it.Type == "function_call_output":
			call, ok := a.ids.decode(idCall, tenant, it.CallID)
			if !ok {
				return in, param + ".call_id", fmt.Sprintf("no tool call %q waits for a result here", shortID(it.CallID))
			}
			out, ok := outputOf(it.Output)
			if !ok {
				return in, param + ".output", "a function_call_output's output is a string or input_text parts"
			}
			if in.target != nil && (in.target.Thread != call.Thread || in.target.Run != call.Run) {
				return in, param + ".call_id", "the function_call_output items answer calls of different responses"
			}
			in.target, users = &call, nil // a message before the outputs is history
			in.results = append(in.results, clientResult{call: call, output: out, param: param})
		case slices.Contains(echoed, it.Type):
			// An earlier turn's item: what came before it (answers
			// included) is history too.
			in.earlier, users, in.approval, in.results, in.target = true, nil, nil, nil, nil
			a.noteEarlier(&in, tenant, it)
		case it.Type == "message" || it.Type == "":
			switch it.Role {
			case "system", "developer":
				// Instructions: read with the request's (docs/serve.md).
			case "user":
				if ap, ok := approvalPart(it.Content); ok {
					// An approval's answer as a message's content part
					// (LangChain sends it so).
					items[i].Type, items[i].ApprovalRequestID, items[i].Approve, items[i].Reason = "mcp_approval_response", ap.ApprovalRequestID, ap.Approve, ap.Reason
					if ap.ApprovalRequestID == "" || ap.Approve == nil {
						return in, param, "an mcp_approval_response needs approval_request_id and approve"
					}
					in.approval, in.target, in.results, users = &items[i], nil, nil, nil
					if id, ok := a.ids.decode(idApproval, tenant, ap.ApprovalRequestID); ok {
						in.interrupt = id.Call
						id.Call = ""
						in.target = &id
					} else {
						in.interrupt = ap.ApprovalRequestID
					}
					continue
				}
				if in.approval != nil {
					in.approval, in.target = nil, nil // an earlier turn's answer, then a new message
				}
				text, ok := contentText(it.Content)
				if !ok {
					return in, param + ".content", "a message's content is a string or input_text parts"
				}
				users = append(users, text)
			case "assistant":
				in.earlier, users, in.approval, in.results, in.target = true, nil, nil, nil, nil
				a.noteEarlier(&in, tenant, it)
			default:
				return in, param + ".role", fmt.Sprintf("role %q is not a message role (user, assistant, system, developer)", it.Role)
			}
		default:
			return in, param + ".type", fmt.Sprintf("input items of type %q are not supported (message, mcp_approval_response, function_call_output)", it.Type)
		}
	}
	switch {
	case in.approval != nil && len(in.results) > 0:
		return in, "input", "an approval answer and tool outputs go in separate requests"
	case len(in.results) > 0 && len(users) > 1:
		return in, "input", "tool outputs and one new user message at most go in a request"
	case len(users) > 1:
		return in, "input", "one new user message a request: the thread keeps the conversation (continue with previous_response_id)"
	case len(users) == 1:
		in.message = users[0]
	}
	return in, "", ""
}

// approvalPart reads a message's content when it is one
// mcp_approval_response part.
func approvalPart(raw json.RawMessage) (inputItem, bool) {
	var parts []inputItem
	if json.Unmarshal(raw, &parts) != nil || len(parts) != 1 || parts[0].Type != "mcp_approval_response" {
		return inputItem{}, false
	}
	return parts[0], true
}

// noteEarlier reads the response an earlier item names, when this server
// made its id for this tenant: an answer's message (resent, or an
// item_reference to it) or a client tool's call.
func (a *apiServer) noteEarlier(in *turnInput, tenant string, it inputItem) {
	var id respID
	var ok bool
	switch {
	case strings.HasPrefix(it.ID, idMessage):
		id, ok = a.ids.decode(idMessage, tenant, it.ID)
	case it.Type == "function_call":
		id, ok = a.ids.decode(idCall, tenant, it.CallID)
	}
	if ok {
		id = respID{Thread: id.Thread, Run: id.Run}
		in.continues = &id
	}
}

// shortID is an id as an error message shows it: at most its first 64
// bytes.
func shortID(id string) string {
	if len(id) > 64 {
		return strings.ToValidUTF8(id[:64], "") + "..."
	}
	return id
}

// outputOf reads a function_call_output's output: a string, or text parts.
func outputOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", true
	}
	return contentText(raw)
}

// instructionsOf joins a request's instructions and its system and
// developer messages.
func instructionsOf(instructions *string, raw json.RawMessage) string {
	var parts []string
	if instructions != nil && strings.TrimSpace(*instructions) != "" {
		parts = append(parts, *instructions)
	}
	var items []inputItem
	if json.Unmarshal(raw, &items) == nil {
		for _, it := range items {
			if (it.Type == "message" || it.Type == "") && (it.Role == "system" || it.Role == "developer") {
				if text, ok := contentText(it.Content); ok && strings.TrimSpace(text) != "" {
					parts = append(parts, text)
				}
			}
		}
	}
	return strings.Join(parts, "\n\n")
}
