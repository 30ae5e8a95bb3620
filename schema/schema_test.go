package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/schema"
)

type refundArgs struct {
	OrderID string      `json:"order_id" jsonschema:"the order to refund"`
	Amount  json.Number `json:"amount"`
	Note    *string     `json:"note,omitempty"`
}

func refund(context.Context, refundArgs) (string, error) { return "rf-1", nil }

// Parameters inferred from the argument type: the properties, their
// types, what is required, descriptions from jsonschema tags.
func TestInferred(t *testing.T) {
	tool, err := schema.Tool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true}, refund)
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(tool.Spec().Parameters, &s))
	assert.Equal(t, "object", s["type"])
	props := s["properties"].(map[string]any)
	assert.Equal(t, "string", props["order_id"].(map[string]any)["type"])
	assert.Equal(t, "the order to refund", props["order_id"].(map[string]any)["description"])
	assert.Equal(t, "number", props["amount"].(map[string]any)["type"], "json.Number is a number")
	assert.ElementsMatch(t, []any{"order_id", "amount"}, s["required"])
	assert.True(t, tool.Spec().Idempotent, "the rest of the spec is kept")
}

// A hand-written Parameters is checked against the type: each way they
// can disagree is one line naming the property.
func TestChecked(t *testing.T) {
	for _, c := range []struct {
		params string
		err    string
	}{
		{`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"},"note":{"type":"string"}},"required":["order_id","amount"]}`, ""},
		{`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"integer"},"note":{}}}`, ""},
		{`{"type":"object","properties":{"order":{"type":"string"},"amount":{"type":"number"},"note":{}}}`,
			`schema: tool "issue_refund": Parameters disagrees with its argument type: property "order" has no field in schema_test.refundArgs; field "order_id" of schema_test.refundArgs is not in Parameters`},
		{`{"type":"object","properties":{"order_id":{"type":"number"},"amount":{"type":"number"},"note":{}}}`,
			`schema: tool "issue_refund": Parameters disagrees with its argument type: property "order_id" is "number", its field encodes as "string"`},
		{`{"type":"array"}`, `schema: tool "issue_refund": Parameters describes a JSON array, not an object`},
		{`{"type":"object","properties":{"order_id":{},"amount":{},"note":{}},"required":["id"]}`,
			`schema: tool "issue_refund": Parameters disagrees with its argument type: required property "id" has no field in schema_test.refundArgs`},
	} {
		_, err := schema.Tool(protocol.ToolSpec{Name: "issue_refund", Parameters: json.RawMessage(c.params)}, refund)
		if c.err == "" {
			assert.NoError(t, err, c.params)
			continue
		}
		var se *schema.Error
		require.ErrorAs(t, err, &se, c.params)
		assert.Equal(t, c.err, err.Error())
	}
}

func TestNotAnObject(t *testing.T) {
	_, err := schema.Tool(protocol.ToolSpec{Name: "t"}, func(context.Context, []string) (int, error) { return 0, nil })
	assert.EqualError(t, err, `schema: tool "t": arguments of type []string are "array", not a JSON object`)
}

// Example: the tool's schema comes from its argument struct.
func Example() {
	tool := schema.MustTool(protocol.ToolSpec{Name: "page_oncall", Idempotent: true},
		func(ctx context.Context, a struct {
			CaseID  string `json:"case_id"`
			Summary string `json:"summary"`
		}) (string, error) {
			return "paged " + a.CaseID, nil
		})
	fmt.Println(string(tool.Spec().Parameters))
	// Output:
	// {"type":"object","properties":{"case_id":{"type":"string"},"summary":{"type":"string"}},"required":["case_id","summary"],"additionalProperties":false}
}
