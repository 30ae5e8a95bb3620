// Package schema declares tulip tools whose argument schema comes from
// their argument type: the JSON Schema the model is shown
// (ToolSpec.Parameters) is inferred from the body's argument struct, or,
// when written by hand, checked against it, so the two cannot disagree.
//
// Deprecated: activities.NewTool does this itself now (the inference is
// the library's, with no dependency); this module wraps it and will be
// removed. Its errors keep their *Error type and text.
//
//	refund := schema.MustTool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true},
//		func(ctx context.Context, a struct {
//			OrderID string  `json:"order_id" jsonschema:"the order to refund"`
//			Amount  float64 `json:"amount"`
//		}) (Receipt, error) { ... })
package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/toolschema"
)

// Error says why a tool's schema cannot be used: its argument type has no
// JSON Schema, or a hand-written Parameters disagrees with it.
type Error struct {
	Tool   string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("schema: tool %q: %s", e.Tool, e.Reason) }

// For returns the JSON Schema of T as a tool's arguments object.
func For[T any]() (json.RawMessage, error) {
	return toolschema.Infer(reflect.TypeFor[T]())
}

// Tool declares a tool as activities.NewTool does, with spec.Parameters
// inferred from T when it is empty, and checked against T (Check) when it
// is given.
func Tool[T, R any](spec protocol.ToolSpec, body func(ctx context.Context, args T) (R, error), opts ...activities.ToolOptions) (*activities.Tool, error) {
	if len(spec.Parameters) == 0 {
		inferred, err := For[T]()
		if err != nil {
			return nil, &Error{Tool: spec.Name, Reason: err.Error()}
		}
		spec.Parameters = inferred
	} else if err := Check[T](spec.Parameters); err != nil {
		return nil, &Error{Tool: spec.Name, Reason: err.Error()}
	}
	return activities.NewTool(spec, body, opts...)
}

// MustTool is Tool that panics on a declaration error, for package-level
// tool variables.
func MustTool[T, R any](spec protocol.ToolSpec, body func(ctx context.Context, args T) (R, error), opts ...activities.ToolOptions) *activities.Tool {
	t, err := Tool(spec, body, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Check reports where a hand-written arguments schema disagrees with T:
// a property T has no field for, a field the schema does not name, a
// required property T cannot hold, or a property whose "type" is not the
// one T's field encodes as.
func Check[T any](params json.RawMessage) error {
	return toolschema.Check(params, reflect.TypeFor[T]())
}
