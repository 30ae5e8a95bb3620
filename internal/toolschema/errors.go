package toolschema

import (
	"fmt"
	"reflect"
	"strings"
)

// Reason is why a Go type has no inferred schema.
type Reason int

const (
	// Unsupported: a channel, function, complex number or unsafe
	// pointer, or a map whose key is not a string, an integer or an
	// encoding.TextUnmarshaler: encoding/json cannot read it.
	Unsupported Reason = iota + 1
	// Recursive: the type contains itself.
	Recursive
	// BadTag: a jsonschema tag that is empty or begins with "WORD=".
	BadTag
	// NotObject: the arguments type is not read from a JSON object.
	NotObject
)

// TypeError says why no schema can be inferred from Type.
type TypeError struct {
	Reason Reason
	// Type is the arguments type; Property the path to the property
	// concerned ("order.lines[].sku"; "" for Type itself), and At the Go
	// type there.
	Type     reflect.Type
	Property string
	At       reflect.Type
	// Tag is a BadTag's tag; Types a NotObject's JSON types.
	Tag   string
	Types []string
}

func (e *TypeError) Error() string {
	where := ""
	if e.Property != "" {
		where = fmt.Sprintf("property %q of %s: ", e.Property, e.Type)
	}
	switch e.Reason {
	case NotObject:
		return fmt.Sprintf("arguments of type %s are %s, not a JSON object", e.Type, typesText(e.Types))
	case Recursive:
		return fmt.Sprintf("%stype %s contains itself: a recursive type has no inferred schema (write it by hand)", where, e.At)
	case BadTag:
		if e.Tag == "" {
			return where + "empty jsonschema tag"
		}
		return fmt.Sprintf("%sjsonschema tag %q begins with \"WORD=\" (the tag is the description)", where, e.Tag)
	}
	if e.At.Kind() == reflect.Map {
		return fmt.Sprintf("%smap key type %s is not a string, an integer or an encoding.TextUnmarshaler", where, e.At.Key())
	}
	return fmt.Sprintf("%stype %s has no JSON Schema (JSON cannot hold a %s)", where, e.At, e.At.Kind())
}

// SchemaError says a hand-written schema is not the JSON Schema of an
// object: not a JSON Schema at all (Err), or one of other Types.
type SchemaError struct {
	Err   error
	Types []string
}

func (e *SchemaError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("Parameters is not a JSON Schema: %v", e.Err)
	}
	t := strings.Join(e.Types, " or ")
	return fmt.Sprintf("Parameters describes a JSON %s, not an object", t)
}

func (e *SchemaError) Unwrap() error { return e.Err }

// Kind is how a hand-written schema disagrees with its type at one
// property.
type Kind int

const (
	// NoField: the schema names a property the type has no field for.
	NoField Kind = iota + 1
	// NotInSchema: the type has a field the schema does not name.
	NotInSchema
	// WrongType: the property's "type" is one its field cannot hold.
	WrongType
	// RequiredNoField: "required" names a property the type has no field
	// for (and "properties" does not name it either).
	RequiredNoField
	// WrongEnum: an "enum" value is one its field cannot hold.
	WrongEnum
)

// Problem is one disagreement: Property is its path ("amount",
// "order.lines[].sku"), In the Go type that has (or lacks) the field,
// Given the schema's type or enum value, Want the JSON types the field
// encodes as (none: any).
type Problem struct {
	Kind     Kind
	Property string
	In       reflect.Type
	Given    string
	Want     []string
}

func (p Problem) String() string {
	switch p.Kind {
	case NoField:
		return fmt.Sprintf("property %q has no field in %s", p.Property, p.In)
	case NotInSchema:
		return fmt.Sprintf("field %q of %s is not in Parameters", p.Property, p.In)
	case WrongType:
		return fmt.Sprintf("property %q is %q, its field encodes as %s", p.Property, p.Given, typesText(p.Want))
	case RequiredNoField:
		return fmt.Sprintf("required property %q has no field in %s", p.Property, p.In)
	case WrongEnum:
		return fmt.Sprintf("property %q has enum value %s, its field encodes as %s", p.Property, p.Given, typesText(p.Want))
	}
	return fmt.Sprintf("property %q: problem %d", p.Property, p.Kind)
}

// MismatchError lists where a hand-written schema disagrees with Type.
type MismatchError struct {
	Type     reflect.Type
	Problems []Problem
}

func (e *MismatchError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "Parameters disagrees with its argument type: " + strings.Join(lines, "; ")
}
