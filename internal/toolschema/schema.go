// Package toolschema infers the JSON Schema of a tool's arguments from
// their Go type, by reflection, and checks a hand-written one against it.
// It has no dependencies outside the standard library.
//
// The schema is the subset of JSON Schema (draft 2020-12) that LLM tool
// calling uses: "type" (one, or ["null", T] for a pointer), "format",
// "description", "enum", "properties", "required", "items" and
// "additionalProperties". A Go type becomes the schema of what
// encoding/json decodes into it:
//
//   - bool is "boolean"; signed and unsigned integers are "integer"; floats
//     and json.Number are "number"; strings are "string".
//   - A pointer is its element's schema that also allows null
//     ("type": ["null", T]), except for the arguments type itself.
//   - A struct is an "object" with "additionalProperties": false. Its
//     properties are its fields as encoding/json names them: the json tag's
//     name, or the field name; "-" and unexported fields are skipped;
//     embedded structs' fields are promoted (with encoding/json's rules
//     when two fields have one name); the ",string" option makes a number
//     or bool a "string". A field is required unless tagged omitempty or
//     omitzero. A jsonschema tag is the property's description (as in
//     github.com/google/jsonschema-go: it must not be empty and must not
//     begin with "WORD=").
//   - A map whose key is a string, an integer or an encoding.TextUnmarshaler
//     is an "object" whose "additionalProperties" is the value's schema
//     (omitted for any value).
//   - A slice or array is an "array" whose "items" is the element's
//     schema; []byte is a "string" (base64, as encoding/json reads it).
//   - time.Time is a "string" of format "date-time".
//   - json.RawMessage, interfaces (any) and other types that decode
//     themselves (json.Unmarshaler) are unconstrained ({}); other
//     encoding.TextUnmarshaler types are "string".
//   - Channels, functions, complex numbers and unsafe pointers have no
//     schema (an UnsupportedError).
//   - A recursive type (one that contains itself, such as a tree node) is
//     refused with an UnsupportedError of reason Recursive rather than
//     described with $defs and $ref, which several model providers do not
//     accept: write its schema by hand; Check checks a hand-written schema
//     as deep as it goes.
//
// Enum values are not inferred (a Go type does not list its values); a
// hand-written schema's enum is checked against the field's type.
package toolschema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Schema is a JSON Schema in the subset above. Its JSON keeps the
// properties in the order of the struct's fields.
type Schema struct {
	// Types is the schema's "type": none (any JSON value), one, or, for a
	// pointer, "null" and one.
	Types       []string
	Format      string
	Description string
	Enum        []any
	// Properties, in Order, and Required are an object's.
	Properties map[string]*Schema
	Order      []string
	Required   []string
	// Items is an array's element schema.
	Items *Schema
	// Closed is "additionalProperties": false (a struct); Additional, when
	// set, is the schema of a map's values.
	Closed     bool
	Additional *Schema
}

// Is reports whether the schema's type is t.
func (s *Schema) Is(t string) bool {
	for _, x := range s.Types {
		if x == t {
			return true
		}
	}
	return false
}

// MarshalJSON writes the schema with its keys in a fixed order: type,
// format, description, enum, properties, required, items,
// additionalProperties.
func (s *Schema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	key := func(k string) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		fmt.Fprintf(&b, "%q:", k)
	}
	put := func(k string, v any) error {
		key(k)
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(j)
		return nil
	}
	switch len(s.Types) {
	case 0:
	case 1:
		if err := put("type", s.Types[0]); err != nil {
			return nil, err
		}
	default:
		if err := put("type", s.Types); err != nil {
			return nil, err
		}
	}
	if s.Format != "" {
		if err := put("format", s.Format); err != nil {
			return nil, err
		}
	}
	if s.Description != "" {
		if err := put("description", s.Description); err != nil {
			return nil, err
		}
	}
	if len(s.Enum) > 0 {
		if err := put("enum", s.Enum); err != nil {
			return nil, err
		}
	}
	if s.Properties != nil {
		key("properties")
		b.WriteByte('{')
		for i, name := range s.Order {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(name)
			b.Write(k)
			b.WriteByte(':')
			j, err := s.Properties[name].MarshalJSON()
			if err != nil {
				return nil, err
			}
			b.Write(j)
		}
		b.WriteByte('}')
	}
	if len(s.Required) > 0 {
		if err := put("required", s.Required); err != nil {
			return nil, err
		}
	}
	if s.Items != nil {
		if err := put("items", s.Items); err != nil {
			return nil, err
		}
	}
	switch {
	case s.Additional != nil:
		if err := put("additionalProperties", s.Additional); err != nil {
			return nil, err
		}
	case s.Closed:
		if err := put("additionalProperties", false); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// typesText is how errors name a schema's types: "string", ["null"
// "string"], or any JSON value.
func typesText(types []string) string {
	switch len(types) {
	case 0:
		return "any JSON value"
	case 1:
		return fmt.Sprintf("%q", types[0])
	}
	return fmt.Sprintf("%q", types)
}
