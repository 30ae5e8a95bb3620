package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

type refundArgs struct {
	OrderID string      `json:"order_id" jsonschema:"the order to refund"`
	Amount  json.Number `json:"amount"`
	Note    *string     `json:"note,omitempty"`
}

func refundBody(context.Context, refundArgs) (string, error) { return "rf-1", nil }

// A spec without Parameters gets T's schema, in the same call; the rest of
// the spec is kept.
func TestNewToolInfersParameters(t *testing.T) {
	tool, err := activities.NewTool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true, KeyTemplate: "refund:{order_id}"}, refundBody)
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{
		"order_id":{"type":"string","description":"the order to refund"},
		"amount":{"type":"number"},
		"note":{"type":["null","string"]}},
		"required":["order_id","amount"],"additionalProperties":false}`, string(tool.Spec().Parameters))
	assert.True(t, tool.Spec().Idempotent)
	assert.Equal(t, "refund:{order_id}", tool.Spec().KeyTemplate)

	for _, c := range []struct {
		name string
		tool func() (*activities.Tool, error)
		want string
	}{
		{"map", func() (*activities.Tool, error) {
			return activities.NewTool(protocol.ToolSpec{Name: "m"}, func(context.Context, map[string]any) (int, error) { return 0, nil })
		}, `{"type":"object"}`},
		{"raw", func() (*activities.Tool, error) {
			return activities.NewTool(protocol.ToolSpec{Name: "r"}, func(context.Context, json.RawMessage) (int, error) { return 0, nil })
		}, `{"type":"object"}`},
		{"no arguments", func() (*activities.Tool, error) {
			return activities.NewTool(protocol.ToolSpec{Name: "n"}, func(context.Context, struct{}) (int, error) { return 0, nil })
		}, `{"type":"object","properties":{},"additionalProperties":false}`},
		{"pointer", func() (*activities.Tool, error) {
			return activities.NewTool(protocol.ToolSpec{Name: "p"}, func(context.Context, *struct {
				N int `json:"n"`
			}) (int, error) {
				return 0, nil
			})
		}, `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`},
	} {
		tool, err := c.tool()
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, string(tool.Spec().Parameters), c.name)
	}
}

// A hand-written Parameters is kept as written when it agrees with T, and
// fails the declaration, naming the tool and the property, when not.
func TestNewToolChecksParameters(t *testing.T) {
	good := `{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"},"note":{}},"required":["order_id","amount"]}`
	tool, err := activities.NewTool(protocol.ToolSpec{Name: "issue_refund", Parameters: json.RawMessage(good)}, refundBody)
	require.NoError(t, err)
	assert.Equal(t, good, string(tool.Spec().Parameters))

	for _, c := range []struct{ params, err string }{
		{`{"type":"object","properties":{"order":{"type":"string"},"amount":{"type":"number"},"note":{}}}`,
			`tulip: tool "issue_refund": Parameters disagrees with its argument type: property "order" has no field in activities_test.refundArgs; field "order_id" of activities_test.refundArgs is not in Parameters`},
		{`{"type":"object","properties":{"order_id":{"type":"integer"},"amount":{"type":"number"},"note":{}}}`,
			`tulip: tool "issue_refund": Parameters disagrees with its argument type: property "order_id" is "integer", its field encodes as "string"`},
		{`{"type":"array"}`, `tulip: tool "issue_refund": Parameters describes a JSON array, not an object`},
	} {
		_, err := activities.NewTool(protocol.ToolSpec{Name: "issue_refund", Parameters: json.RawMessage(c.params)}, refundBody)
		var se *activities.ToolSchemaError
		require.True(t, errors.As(err, &se), c.params)
		assert.Equal(t, "issue_refund", se.Tool)
		assert.EqualError(t, err, c.err)
	}
	// Invalid JSON is refused as before.
	_, err = activities.NewTool(protocol.ToolSpec{Name: "t", Parameters: json.RawMessage(`{`)}, refundBody)
	assert.EqualError(t, err, `tulip: tool "t": parameters are not valid JSON`)
}

type treeNode struct {
	Name     string      `json:"name"`
	Children []*treeNode `json:"children,omitempty"`
}

// A type with no inferred schema fails the declaration unless Parameters
// is written by hand; a recursive one's is then checked.
func TestNewToolWithoutSchema(t *testing.T) {
	walk := func(context.Context, treeNode) (int, error) { return 0, nil }
	_, err := activities.NewTool(protocol.ToolSpec{Name: "walk"}, walk)
	var se *activities.ToolSchemaError
	require.ErrorAs(t, err, &se)
	assert.EqualError(t, err, `tulip: tool "walk": property "children[]" of activities_test.treeNode: type activities_test.treeNode contains itself: a recursive type has no inferred schema (write it by hand)`)

	_, err = activities.NewTool(protocol.ToolSpec{Name: "walk", Parameters: json.RawMessage(
		`{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name"]}`)}, walk)
	assert.NoError(t, err)

	_, err = activities.NewTool(protocol.ToolSpec{Name: "echo"}, func(context.Context, string) (string, error) { return "", nil })
	assert.EqualError(t, err, `tulip: tool "echo": arguments of type string are "string", not a JSON object`)

	assert.Panics(t, func() {
		activities.MustTool(protocol.ToolSpec{Name: "walk"}, walk)
	})
}

// ToolFromSpec keeps its spec as given: no type to infer from or check.
func TestToolFromSpecKeepsParameters(t *testing.T) {
	assert.Empty(t, activities.ToolFromSpec(protocol.ToolSpec{Name: "remote"}).Spec().Parameters)
	p := json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)
	assert.Equal(t, p, activities.ToolFromSpec(protocol.ToolSpec{Name: "remote", Parameters: p}).Spec().Parameters)
}
