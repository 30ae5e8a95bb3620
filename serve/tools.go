package serve

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/tulip-temporal/tulip/internal/protocol"
)

// A request's tools (the client's function tools, bounded) and model
// parameters.

// clientTool is a function tool a request offers: the client runs it.
type clientTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// ServerLabel names a hosted MCP tool ("mcp"): "tulip", the agent's
	// own tools, which a framework declares to take their calls and
	// approvals (the Agents SDK's hostedMcpTool).
	ServerLabel string `json:"server_label"`
	// Function holds the tool in Chat Completions' shape.
	Function *clientTool `json:"function"`
	// Tulip is tulip's extension: {"idempotent": true} serves an
	// identical repeat of the call from the log.
	Tulip *struct {
		Idempotent bool `json:"idempotent"`
	} `json:"tulip"`
}

// What one request may offer: OpenAI's own bound on tools, and bounds on
// their schemas that keep every check linear and small.
const (
	maxClientTools  = 128      // tools a request offers
	maxSchemaBytes  = 64 << 10 // one tool's parameters
	maxSchemasBytes = 1 << 20  // all of a request's tools' parameters
	maxSchemaDepth  = 32       // nesting of one tool's parameters
	maxInputItems   = 4096     // a request's input items or messages
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// clientTools reads a request's tools: function tools only, no clash with
// the agent's own, idempotent when marked (the tool's tulip field, or the
// request's metadata tulip_idempotent_tools: names, comma-separated). It
// refuses more than maxClientTools tools and schemas over their bounds,
// and its checks are linear in the request.
func (a *apiServer) clientTools(raw []json.RawMessage, metadata map[string]any) ([]protocol.ToolSpec, string, string) {
	if len(raw) > maxClientTools {
		return nil, "tools", fmt.Sprintf("a request offers at most %d tools, not %d", maxClientTools, len(raw))
	}
	idem := map[string]bool{}
	if v, ok := metadata["tulip_idempotent_tools"].(string); ok {
		for _, n := range strings.Split(v, ",") {
			idem[strings.TrimSpace(n)] = true
		}
	}
	var specs []protocol.ToolSpec
	names := make(map[string]bool, len(raw))
	total := 0
	for i, r := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		var t clientTool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, param, "a tool is an object: " + err.Error()
		}
		if t.Type == "mcp" && t.ServerLabel == "tulip" {
			continue // the agent's own tools, declared: they run on the server, approved by its hooks
		}
		if t.Type == "mcp" {
			return nil, param + ".server_label", fmt.Sprintf("the only MCP server here is the agent's own, server_label \"tulip\", not %q", t.ServerLabel)
		}
		if t.Type != "function" {
			return nil, param + ".type", fmt.Sprintf("tools of type %q are not supported: the agent's own tools run on the server; a client offers function tools", t.Type)
		}
		if t.Function != nil { // Chat Completions
			t.Name, t.Description, t.Parameters = t.Function.Name, t.Function.Description, t.Function.Parameters
			if t.Function.Tulip != nil {
				t.Tulip = t.Function.Tulip
			}
		}
		if t.Name == "" {
			return nil, param + ".name", "a function tool needs a name"
		}
		if !toolNameRE.MatchString(t.Name) {
			return nil, param + ".name", "a tool's name is 1-64 of a-z A-Z 0-9 _ -"
		}
		if a.ownTool(t.Name) {
			return nil, param + ".name", fmt.Sprintf("the tool %q is the agent's own (it runs on the server): give the client's tool another name", t.Name)
		}
		if names[t.Name] {
			return nil, param + ".name", fmt.Sprintf("the tool %q is offered twice", t.Name)
		}
		names[t.Name] = true
		params := t.Parameters
		if len(params) > maxSchemaBytes {
			return nil, param + ".parameters", fmt.Sprintf("a tool's parameters schema is at most %d bytes", maxSchemaBytes)
		}
		if total += len(params); total > maxSchemasBytes {
			return nil, param + ".parameters", fmt.Sprintf("the tools' parameters schemas are at most %d bytes together", maxSchemasBytes)
		}
		if jsonDepth(params) > maxSchemaDepth {
			return nil, param + ".parameters", fmt.Sprintf("a tool's parameters schema nests at most %d levels", maxSchemaDepth)
		}
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		specs = append(specs, protocol.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params,
			Idempotent: idem[t.Name] || (t.Tulip != nil && t.Tulip.Idempotent)})
	}
	return specs, "", ""
}

// ownTool: name is one of the agent's own tools.
func (a *apiServer) ownTool(name string) bool {
	_, ok := a.toolSet[name]
	return ok
}

// jsonDepth is the deepest nesting of objects and arrays in valid JSON
// text, read in one pass.
func jsonDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// modelParams are a request's model parameters (nil when none is set).
func modelParams(temperature, topP *float64, maxTokens *int) (*protocol.ModelParams, string, string) {
	if temperature == nil && topP == nil && maxTokens == nil {
		return nil, "", ""
	}
	if temperature != nil && (*temperature < 0 || *temperature > 2) {
		return nil, "temperature", "temperature is between 0 and 2"
	}
	if topP != nil && (*topP < 0 || *topP > 1) {
		return nil, "top_p", "top_p is between 0 and 1"
	}
	if maxTokens != nil && *maxTokens < 1 {
		return nil, "max_output_tokens", "max_output_tokens is at least 1"
	}
	return &protocol.ModelParams{Temperature: temperature, TopP: topP, MaxOutputTokens: maxTokens}, "", ""
}
