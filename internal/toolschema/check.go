package toolschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// Check reports where a hand-written schema of a tool's arguments
// disagrees with their type t:
//
//   - a property t has no field for (NoField), or a field of t the schema
//     does not name (NotInSchema);
//   - a "required" name t has no field for (RequiredNoField);
//   - a property whose "type" is not one its field encodes as (WrongType;
//     "integer" and "number" are taken for each other, and "null" in a
//     list of types is let through, since encoding/json reads null into
//     any field as nothing), or whose "enum" holds a value its field
//     cannot hold (WrongEnum).
//
// Nested objects are checked the same way when the schema lists their
// "properties" (one that lists none is left open), and so are arrays'
// "items" and maps' values. A map type takes any property name. An
// arguments type that takes any JSON value (any, json.RawMessage) takes
// any schema of an object.
//
// Errors are *SchemaError (schema is not the JSON Schema of an object),
// *TypeError (t is not read from an object) and *MismatchError (every
// disagreement, by property).
func Check(schema json.RawMessage, t reflect.Type) error {
	g, err := parse(schema)
	if err != nil {
		return &SchemaError{Err: err}
	}
	if g == nil {
		return &SchemaError{Err: fmt.Errorf("%s is not a JSON object", clip(schema))}
	}
	if len(g.types) > 0 && !slices.Contains(g.types, "object") {
		return &SchemaError{Types: g.types}
	}
	sh := shapeOf(t)
	sh.nullable = false
	switch {
	case sh.unsupported:
		return &TypeError{Reason: Unsupported, Type: t, At: sh.t}
	case sh.types == nil:
		return nil
	case !sh.isStruct && !sh.isMap:
		return &TypeError{Reason: NotObject, Type: t, At: sh.t, Types: sh.types}
	}
	c := checker{root: t}
	c.object(g, sh, "")
	if c.err != nil {
		return c.err
	}
	if len(c.problems) > 0 {
		return &MismatchError{Type: t, Problems: c.problems}
	}
	return nil
}

// given is the part of a hand-written schema Check reads.
type given struct {
	types             []string
	properties        map[string]json.RawMessage
	required          []string
	items, additional json.RawMessage
	enum              []json.RawMessage
}

// parse reads a schema; a boolean schema (true, false) is nil.
func parse(raw json.RawMessage) (*given, error) {
	var w struct {
		Type                 json.RawMessage            `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		Items                json.RawMessage            `json:"items"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
		Enum                 []json.RawMessage          `json:"enum"`
	}
	raw = bytes.TrimSpace(raw)
	if bytes.Equal(raw, []byte("true")) || bytes.Equal(raw, []byte("false")) {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%s is not a JSON object", clip(raw))
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	g := &given{properties: w.Properties, required: w.Required, items: w.Items, additional: w.AdditionalProperties, enum: w.Enum}
	if len(w.Type) > 0 {
		var one string
		if err := json.Unmarshal(w.Type, &one); err == nil {
			g.types = []string{one}
		} else if err := json.Unmarshal(w.Type, &g.types); err != nil {
			return nil, fmt.Errorf(`"type" is %s, not a type name or a list of them`, w.Type)
		}
	}
	return g, nil
}

type checker struct {
	root     reflect.Type
	problems []Problem
	err      error
}

func (c *checker) add(p Problem) { c.problems = append(c.problems, p) }

// object checks g's properties against a struct's fields or a map's
// values.
func (c *checker) object(g *given, sh shape, path string) {
	names := sortedKeys(g.properties)
	if sh.isMap {
		elem := shapeOf(sh.elem)
		for _, name := range names {
			c.value(g.properties[name], elem, join(path, name))
		}
		if len(g.additional) > 0 {
			c.value(g.additional, elem, join(path, "*"))
		}
		return
	}
	fields := map[string]field{}
	var fieldNames []string
	for _, f := range sh.fields {
		fields[f.name] = f
		fieldNames = append(fieldNames, f.name)
	}
	slices.Sort(fieldNames)
	for _, name := range names {
		f, ok := fields[name]
		if !ok {
			c.add(Problem{Kind: NoField, Property: join(path, name), In: sh.t})
			continue
		}
		c.value(g.properties[name], f.shape(), join(path, name))
	}
	for _, name := range fieldNames {
		if _, ok := g.properties[name]; !ok {
			c.add(Problem{Kind: NotInSchema, Property: join(path, name), In: sh.t})
		}
	}
	for _, name := range g.required {
		_, field := fields[name]
		_, listed := g.properties[name]
		if !field && !listed {
			c.add(Problem{Kind: RequiredNoField, Property: join(path, name), In: sh.t})
		}
	}
}

// value checks one property's schema against what its field holds.
func (c *checker) value(raw json.RawMessage, w shape, path string) {
	g, err := parse(raw)
	if err != nil {
		if c.err == nil {
			c.err = &SchemaError{Err: fmt.Errorf("property %q: %v", path, err)}
		}
		return
	}
	if g == nil {
		return
	}
	if w.unsupported {
		if c.err == nil {
			c.err = &TypeError{Reason: Unsupported, Type: c.root, Property: path, At: w.t}
		}
		return
	}
	want := w.wantTypes()
	if len(want) > 0 {
		for _, t := range g.types {
			if t == "null" && len(g.types) > 1 {
				continue
			}
			if !compatible(t, want) {
				c.add(Problem{Kind: WrongType, Property: path, Given: t, Want: want})
				return
			}
		}
		for _, e := range g.enum {
			if t := jsonType(e); t != "null" && !compatible(t, want) {
				c.add(Problem{Kind: WrongEnum, Property: path, Given: compact(e), Want: want})
				return
			}
		}
	}
	switch {
	case w.isStruct && g.properties != nil, w.isMap && (g.properties != nil || len(g.additional) > 0):
		c.object(g, w, path)
	case w.elem != nil && !w.isMap && len(g.items) > 0:
		c.value(g.items, shapeOf(w.elem), path+"[]")
	}
}

// compatible: a given type is one of the field's, or "number" for an
// integer field, or "integer" for a number field.
func compatible(given string, want []string) bool {
	for _, t := range want {
		if t == given || (t == "integer" && given == "number") || (t == "number" && given == "integer") {
			return true
		}
	}
	return false
}

// jsonType is the JSON type of a value; an integer's is "integer".
func jsonType(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "null"
	}
	switch v[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(v, ".eE") {
		return "number"
	}
	return "integer"
}

func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// clip is at most 40 bytes of a schema, for an error.
func clip(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}
