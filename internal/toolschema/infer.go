package toolschema

import (
	"encoding/json"
	"reflect"
	"regexp"
)

// Infer returns the JSON Schema of a tool's arguments of type t, which
// must be read from a JSON object: a struct, a map, or a type that takes
// any JSON value (any, json.RawMessage), whose schema is then
// {"type":"object"}. A pointer to one is the same (the arguments are not
// null). Errors are *TypeError.
func Infer(t reflect.Type) (json.RawMessage, error) {
	s, err := Arguments(t)
	if err != nil {
		return nil, err
	}
	return s.MarshalJSON()
}

// Arguments is Infer's schema before it is written as JSON.
func Arguments(t reflect.Type) (*Schema, error) {
	sh := shapeOf(t)
	sh.nullable = false
	if sh.unsupported {
		return nil, &TypeError{Reason: Unsupported, Type: t, At: sh.t}
	}
	if sh.types == nil {
		return &Schema{Types: []string{"object"}}, nil
	}
	if !sh.isStruct && !sh.isMap {
		return nil, &TypeError{Reason: NotObject, Type: t, At: sh.t, Types: sh.types}
	}
	return (&inferrer{root: t, in: map[reflect.Type]bool{}}).schema(sh, "")
}

// For returns the JSON Schema of values of type t, of any JSON type.
// Errors are *TypeError.
func For(t reflect.Type) (*Schema, error) {
	return (&inferrer{root: t, in: map[reflect.Type]bool{}}).schema(shapeOf(t), "")
}

type inferrer struct {
	root reflect.Type
	// in holds the types being described, outermost first: one met again
	// inside itself is recursive.
	in map[reflect.Type]bool
}

// reservedTag is a jsonschema tag that github.com/google/jsonschema-go
// refuses, keeping "WORD=..." for future keywords.
var reservedTag = regexp.MustCompile(`^[^ \t\n]*=`)

func (n *inferrer) schema(sh shape, path string) (*Schema, error) {
	if sh.unsupported {
		return nil, &TypeError{Reason: Unsupported, Type: n.root, Property: path, At: sh.t}
	}
	s := &Schema{Types: sh.wantTypes(), Format: sh.format}
	if !sh.isStruct && !sh.isMap && sh.elem == nil {
		return s, nil
	}
	if n.in[sh.t] {
		return nil, &TypeError{Reason: Recursive, Type: n.root, Property: path, At: sh.t}
	}
	n.in[sh.t] = true
	defer delete(n.in, sh.t)
	switch {
	case sh.isStruct:
		s.Properties, s.Closed = map[string]*Schema{}, true
		for _, f := range sh.fields {
			p := join(path, f.name)
			fs, err := n.schema(f.shape(), p)
			if err != nil {
				return nil, err
			}
			if tag, ok := f.sf.Tag.Lookup("jsonschema"); ok {
				if tag == "" || reservedTag.MatchString(tag) {
					return nil, &TypeError{Reason: BadTag, Type: n.root, Property: p, At: f.sf.Type, Tag: tag}
				}
				fs.Description = tag
			}
			s.Properties[f.name] = fs
			s.Order = append(s.Order, f.name)
			if !f.optional {
				s.Required = append(s.Required, f.name)
			}
		}
	case sh.isMap:
		es, err := n.schema(shapeOf(sh.elem), join(path, "*"))
		if err != nil {
			return nil, err
		}
		if !es.any() {
			s.Additional = es
		}
	default:
		es, err := n.schema(shapeOf(sh.elem), path+"[]")
		if err != nil {
			return nil, err
		}
		s.Items = es
	}
	return s, nil
}

// any: the schema takes any JSON value.
func (s *Schema) any() bool {
	return len(s.Types) == 0 && s.Format == "" && len(s.Enum) == 0 && s.Properties == nil &&
		s.Items == nil && !s.Closed && s.Additional == nil
}

// join is a property path: "order", "order.lines[].sku".
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
