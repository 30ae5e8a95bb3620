package toolschema

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"
)

// A shape is what encoding/json reads into a Go type, one level deep: its
// JSON types and, for an object or an array, what it holds.
type shape struct {
	t        reflect.Type // the type, pointers followed
	types    []string     // nil: any JSON value
	nullable bool         // a pointer: null too
	format   string
	// fields are a struct's properties; elem is a map's value or an
	// array's element type.
	fields      []field
	isStruct    bool
	isMap       bool
	elem        reflect.Type
	unsupported bool
}

// wantTypes are the JSON types the shape accepts: its types, and null for
// a pointer.
func (s shape) wantTypes() []string {
	if s.nullable && len(s.types) > 0 {
		return append([]string{"null"}, s.types...)
	}
	return s.types
}

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	numberType          = reflect.TypeFor[json.Number]()
	timeType            = reflect.TypeFor[time.Time]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// implements: t or *t has the method set of iface (encoding/json calls
// the pointer's methods, since it decodes into addressable values).
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface))
}

// shapeOf returns how encoding/json reads t.
func shapeOf(t reflect.Type) shape {
	var s shape
	for t.Kind() == reflect.Pointer {
		s.nullable = true
		t = t.Elem()
	}
	s.t = t
	switch {
	case t == rawMessageType:
		return s
	case t == numberType:
		s.types = []string{"number"}
		return s
	case t == timeType:
		s.types, s.format = []string{"string"}, "date-time"
		return s
	case implements(t, jsonUnmarshalerType):
		return s
	case implements(t, textUnmarshalerType):
		s.types = []string{"string"}
		return s
	}
	switch t.Kind() {
	case reflect.Bool:
		s.types = []string{"boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.types = []string{"integer"}
	case reflect.Float32, reflect.Float64:
		s.types = []string{"number"}
	case reflect.String:
		s.types = []string{"string"}
	case reflect.Interface:
	case reflect.Map:
		switch k := t.Key(); {
		case k.Kind() == reflect.String, implements(k, textUnmarshalerType):
		case k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr:
		default:
			s.unsupported = true
			return s
		}
		s.types, s.isMap, s.elem = []string{"object"}, true, t.Elem()
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !implements(t.Elem(), jsonUnmarshalerType) && !implements(t.Elem(), textUnmarshalerType) {
			s.types = []string{"string"} // base64
			return s
		}
		s.types, s.elem = []string{"array"}, t.Elem()
	case reflect.Array:
		s.types, s.elem = []string{"array"}, t.Elem()
	case reflect.Struct:
		s.types, s.isStruct, s.fields = []string{"object"}, true, jsonFields(t)
	default:
		s.unsupported = true
	}
	return s
}

// field is a struct field as encoding/json sees it.
type field struct {
	name     string
	tagged   bool // the name comes from the json tag
	index    []int
	optional bool // omitempty or omitzero
	quoted   bool // ",string": a number or bool written as a string
	sf       reflect.StructField
}

// fieldShape is the shape of f's value, a ",string" scalar a string.
func (f field) shape() shape {
	s := shapeOf(f.sf.Type)
	if f.quoted && len(s.types) == 1 {
		s.types, s.format = []string{"string"}, ""
	}
	return s
}

// jsonFields lists the fields encoding/json reads into a struct of type t,
// in field order: the visible fields of encoding/json's typeFields, with
// its rules for embedded structs and for fields that share a name.
func jsonFields(t reflect.Type) []field {
	type level struct {
		t     reflect.Type
		index []int
	}
	var fields []field
	next := []level{{t: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current := next
		next = nil
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, l := range current {
			if visited[l.t] {
				continue
			}
			visited[l.t] = true
			for i := range l.t.NumField() {
				sf := l.t.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clone(l.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := field{name: name, tagged: name != "", index: index, sf: sf}
					if f.name == "" {
						f.name = sf.Name
					}
					for o := range strings.SplitSeq(opts, ",") {
						switch o {
						case "omitempty", "omitzero":
							f.optional = true
						case "string":
							switch ft.Kind() {
							case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
								reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
								reflect.Float32, reflect.Float64, reflect.String:
								f.quoted = true
							}
						}
					}
					fields = append(fields, f)
					if count[l.t] > 1 {
						// The embedded type appeared more than once at
						// this depth: a duplicate, so the name annihilates.
						fields = append(fields, f)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, level{t: ft, index: index})
				}
			}
		}
	}
	// Of the fields that share a name, the shallowest wins, then the tagged
	// one; a tie hides them all.
	slices.SortStableFunc(fields, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := len(a.index) - len(b.index); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		if j-i == 1 || len(fields[i].index) != len(fields[i+1].index) || fields[i].tagged != fields[i+1].tagged {
			out = append(out, fields[i])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	return out
}

// validTagName is encoding/json's isValidTag.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
