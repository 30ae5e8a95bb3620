// Package schema declares tulip tools whose argument schema comes from
// their argument type: the JSON Schema the model is shown
// (ToolSpec.Parameters) is inferred from the body's argument struct, or,
// when written by hand, checked against it, so the two cannot disagree.
//
// It is a module of its own (on github.com/google/jsonschema-go, the
// library the MCP Go SDK uses), so that the tulip library module keeps only
// the Temporal SDK, its API and testify.
//
//	refund := schema.MustTool(activities.ToolSpec{Name: "issue_refund", Idempotent: true},
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
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tulip-temporal/tulip/internal/activities"
)

// Error says why a tool's schema cannot be used: its argument type has no
// JSON Schema, or a hand-written Parameters disagrees with it.
type Error struct {
	Tool   string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("schema: tool %q: %s", e.Tool, e.Reason) }

// options are how Go types become JSON Schema here: json.Number is a
// number (encoding/json reads any JSON number into it).
var options = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.Number](): {Type: "number"},
}}

// For returns the JSON Schema of T as a tool's arguments object.
func For[T any]() (json.RawMessage, error) {
	s, err := jsonschema.For[T](options)
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("arguments of type %s are %s, not a JSON object", reflect.TypeFor[T](), typeOf(s))
	}
	return json.Marshal(s)
}

// Tool declares a tool as activities.NewTool does, with spec.Parameters
// inferred from T when it is empty, and checked against T (Check) when it
// is given.
func Tool[T, R any](spec activities.ToolSpec, body func(ctx context.Context, args T) (R, error), opts ...activities.ToolOptions) (*activities.Tool, error) {
	inferred, err := For[T]()
	if err != nil {
		return nil, &Error{Tool: spec.Name, Reason: err.Error()}
	}
	if len(spec.Parameters) == 0 {
		spec.Parameters = inferred
	} else if err := Check[T](spec.Parameters); err != nil {
		return nil, &Error{Tool: spec.Name, Reason: err.Error()}
	}
	return activities.NewTool(spec, body, opts...)
}

// MustTool is Tool that panics on a declaration error, for package-level
// tool variables.
func MustTool[T, R any](spec activities.ToolSpec, body func(ctx context.Context, args T) (R, error), opts ...activities.ToolOptions) *activities.Tool {
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
	var given jsonschema.Schema
	if err := json.Unmarshal(params, &given); err != nil {
		return fmt.Errorf("Parameters is not a JSON Schema: %v", err)
	}
	if given.Type != "" && given.Type != "object" {
		return fmt.Errorf("Parameters describes a JSON %s, not an object", given.Type)
	}
	raw, err := For[T]()
	if err != nil {
		return err
	}
	var want jsonschema.Schema
	if err := json.Unmarshal(raw, &want); err != nil {
		return err
	}
	if len(want.Properties) == 0 && want.AdditionalProperties == nil {
		return nil // a map: any object
	}
	var problems []string
	for _, name := range sortedKeys(given.Properties) {
		w, ok := want.Properties[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("property %q has no field in %s", name, reflect.TypeFor[T]()))
			continue
		}
		if g := given.Properties[name]; g.Type != "" && !compatible(g.Type, w) {
			problems = append(problems, fmt.Sprintf("property %q is %q, its field encodes as %s", name, g.Type, typeOf(w)))
		}
	}
	for _, name := range sortedKeys(want.Properties) {
		if _, ok := given.Properties[name]; !ok {
			problems = append(problems, fmt.Sprintf("field %q of %s is not in Parameters", name, reflect.TypeFor[T]()))
		}
	}
	for _, name := range given.Required {
		if _, ok := want.Properties[name]; !ok && !slices.Contains(problems, fmt.Sprintf("property %q has no field in %s", name, reflect.TypeFor[T]())) {
			problems = append(problems, fmt.Sprintf("required property %q has no field in %s", name, reflect.TypeFor[T]()))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("Parameters disagrees with its argument type: %s", strings.Join(problems, "; "))
	}
	return nil
}

// compatible: a given type is the field's type, or "number" for an integer
// field, or one of the field's types (a pointer's ["null", T]).
func compatible(given string, want *jsonschema.Schema) bool {
	types := want.Types
	if want.Type != "" {
		types = append(types, want.Type)
	}
	for _, t := range types {
		if t == given || (t == "integer" && given == "number") || (t == "number" && given == "integer") {
			return true
		}
	}
	return len(types) == 0 // a field of any type
}

func typeOf(s *jsonschema.Schema) string {
	if s.Type != "" {
		return fmt.Sprintf("%q", s.Type)
	}
	if len(s.Types) > 0 {
		return fmt.Sprintf("%q", s.Types)
	}
	return "any JSON value"
}

func sortedKeys(m map[string]*jsonschema.Schema) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
