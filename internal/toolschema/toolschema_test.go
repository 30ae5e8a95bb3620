package toolschema_test

import (
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/toolschema"
)

type Base struct {
	ID    string `json:"id" jsonschema:"the record id"`
	Shade string `json:"shade,omitempty"`
}

type (
	refund struct {
		OrderID string      `json:"order_id" jsonschema:"the order to refund"`
		Amount  json.Number `json:"amount"`
		Note    *string     `json:"note,omitempty"`
	}
	scalars struct {
		B   bool
		I   int
		I8  int8
		U64 uint64
		F   float32
		S   string
		P   *int `json:"p"`
		PP  **bool
		N   int  `json:"n,string"`
		Q   *int `json:"q,string,omitempty"`
		Z   int  `json:"z,omitzero"`
	}
	containers struct {
		Tags   []string            `json:"tags"`
		Grid   [2][3]int           `json:"grid"`
		Bytes  []byte              `json:"bytes"`
		Labels map[string]string   `json:"labels"`
		Counts map[int]float64     `json:"counts"`
		Any    map[string]any      `json:"any"`
		Lists  map[string][]string `json:"lists"`
		Items  []struct {
			SKU string `json:"sku"`
		} `json:"items"`
	}
	special struct {
		At    time.Time       `json:"at"`
		When  *time.Time      `json:"when,omitempty"`
		Raw   json.RawMessage `json:"raw"`
		Value any             `json:"value"`
		IP    net.IP          `json:"ip"`
		Wait  time.Duration   `json:"wait"`
	}
	skipped struct {
		Kept    string `json:"kept"`
		Dropped string `json:"-"`
		Dash    string `json:"-,"`
		hidden  string //nolint:unused
		Untag   string
		Bad     string `json:"bad\"name"`
	}
	embeds struct {
		Base
		*Inner
		Named Base `json:"named"`
		Shade int  `json:"shade"` // shallower than Base.Shade: wins
	}
	Inner struct {
		Depth int `json:"depth,omitempty"`
	}
	A struct {
		X string
	}
	B struct {
		X int
	}
	ambiguous struct { // A.X and B.X tie: neither is encoded
		A
		B
		Y string `json:"y"`
	}
	TaggedA struct {
		X int `json:"X"`
	}
	UntaggedB struct {
		X string
	}
	tagWins struct { // TaggedA.X is tagged, UntaggedB.X is not: TaggedA's wins
		TaggedA
		UntaggedB
	}
	named struct {
		Base `json:"base"`
	}
	node struct {
		Name     string  `json:"name"`
		Children []*node `json:"children"`
	}
	viaMap struct {
		Next map[string]viaMap `json:"next"`
	}
	twice struct { // one type twice is not recursion
		From Base `json:"from"`
		To   Base `json:"to"`
	}
	withChan struct {
		C chan int `json:"c"`
	}
	withFunc struct {
		Inner struct {
			F func() `json:"f"`
		} `json:"inner"`
	}
	boolKey struct {
		M map[bool]string `json:"m"`
	}
	emptyTag struct {
		X string `json:"x" jsonschema:""`
	}
	wordTag struct {
		X string `json:"x" jsonschema:"description=the x"`
	}
	custom  struct{ v string }
	withCus struct {
		C custom `json:"c"`
	}
)

func (c *custom) UnmarshalJSON(b []byte) error { c.v = string(b); return nil }

func TestInfer(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"refund", reflect.TypeFor[refund](),
			`{"type":"object","properties":{"order_id":{"type":"string","description":"the order to refund"},"amount":{"type":"number"},"note":{"type":["null","string"]}},"required":["order_id","amount"],"additionalProperties":false}`},
		{"pointer to struct: not nullable", reflect.TypeFor[*refund](),
			`{"type":"object","properties":{"order_id":{"type":"string","description":"the order to refund"},"amount":{"type":"number"},"note":{"type":["null","string"]}},"required":["order_id","amount"],"additionalProperties":false}`},
		{"scalars", reflect.TypeFor[scalars](),
			`{"type":"object","properties":{"B":{"type":"boolean"},"I":{"type":"integer"},"I8":{"type":"integer"},"U64":{"type":"integer"},"F":{"type":"number"},"S":{"type":"string"},"p":{"type":["null","integer"]},"PP":{"type":["null","boolean"]},"n":{"type":"string"},"q":{"type":["null","string"]},"z":{"type":"integer"}},"required":["B","I","I8","U64","F","S","p","PP","n"],"additionalProperties":false}`},
		{"containers", reflect.TypeFor[containers](),
			`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}},"grid":{"type":"array","items":{"type":"array","items":{"type":"integer"}}},"bytes":{"type":"string"},"labels":{"type":"object","additionalProperties":{"type":"string"}},"counts":{"type":"object","additionalProperties":{"type":"number"}},"any":{"type":"object"},"lists":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string"}}},"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}},"required":["sku"],"additionalProperties":false}}},"required":["tags","grid","bytes","labels","counts","any","lists","items"],"additionalProperties":false}`},
		{"special types", reflect.TypeFor[special](),
			`{"type":"object","properties":{"at":{"type":"string","format":"date-time"},"when":{"type":["null","string"],"format":"date-time"},"raw":{},"value":{},"ip":{"type":"string"},"wait":{"type":"integer"}},"required":["at","raw","value","ip","wait"],"additionalProperties":false}`},
		{"skipped fields", reflect.TypeFor[skipped](),
			`{"type":"object","properties":{"kept":{"type":"string"},"-":{"type":"string"},"Untag":{"type":"string"},"Bad":{"type":"string"}},"required":["kept","-","Untag","Bad"],"additionalProperties":false}`},
		{"embedded structs flattened", reflect.TypeFor[embeds](),
			`{"type":"object","properties":{"id":{"type":"string","description":"the record id"},"depth":{"type":"integer"},"named":{"type":"object","properties":{"id":{"type":"string","description":"the record id"},"shade":{"type":"string"}},"required":["id"],"additionalProperties":false},"shade":{"type":"integer"}},"required":["id","named","shade"],"additionalProperties":false}`},
		{"same name, same depth: dropped", reflect.TypeFor[ambiguous](),
			`{"type":"object","properties":{"y":{"type":"string"}},"required":["y"],"additionalProperties":false}`},
		{"same name, tagged wins", reflect.TypeFor[tagWins](),
			`{"type":"object","properties":{"X":{"type":"integer"}},"required":["X"],"additionalProperties":false}`},
		{"tagged embedded struct is a property", reflect.TypeFor[named](),
			`{"type":"object","properties":{"base":{"type":"object","properties":{"id":{"type":"string","description":"the record id"},"shade":{"type":"string"}},"required":["id"],"additionalProperties":false}},"required":["base"],"additionalProperties":false}`},
		{"one type twice", reflect.TypeFor[twice](),
			`{"type":"object","properties":{"from":{"type":"object","properties":{"id":{"type":"string","description":"the record id"},"shade":{"type":"string"}},"required":["id"],"additionalProperties":false},"to":{"type":"object","properties":{"id":{"type":"string","description":"the record id"},"shade":{"type":"string"}},"required":["id"],"additionalProperties":false}},"required":["from","to"],"additionalProperties":false}`},
		{"json.Unmarshaler: unconstrained", reflect.TypeFor[withCus](),
			`{"type":"object","properties":{"c":{}},"required":["c"],"additionalProperties":false}`},
		{"empty struct", reflect.TypeFor[struct{}](), `{"type":"object","properties":{},"additionalProperties":false}`},
		{"map", reflect.TypeFor[map[string]any](), `{"type":"object"}`},
		{"map of ints", reflect.TypeFor[map[string]int](), `{"type":"object","additionalProperties":{"type":"integer"}}`},
		{"any", reflect.TypeFor[any](), `{"type":"object"}`},
		{"json.RawMessage", reflect.TypeFor[json.RawMessage](), `{"type":"object"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := toolschema.Infer(c.typ)
			require.NoError(t, err)
			assert.Equal(t, c.want, string(got))
			assert.NoError(t, toolschema.Check(got, c.typ), "an inferred schema passes its check")
		})
	}
}

func TestInferErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		typ      reflect.Type
		reason   toolschema.Reason
		property string
		msg      string
	}{
		{"slice", reflect.TypeFor[[]string](), toolschema.NotObject, "",
			`arguments of type []string are "array", not a JSON object`},
		{"string", reflect.TypeFor[*string](), toolschema.NotObject, "",
			`arguments of type *string are "string", not a JSON object`},
		{"recursive via slice", reflect.TypeFor[node](), toolschema.Recursive, "children[]",
			`property "children[]" of toolschema_test.node: type toolschema_test.node contains itself: a recursive type has no inferred schema (write it by hand)`},
		{"recursive via map", reflect.TypeFor[viaMap](), toolschema.Recursive, "next.*",
			`property "next.*" of toolschema_test.viaMap: type toolschema_test.viaMap contains itself: a recursive type has no inferred schema (write it by hand)`},
		{"channel", reflect.TypeFor[withChan](), toolschema.Unsupported, "c",
			`property "c" of toolschema_test.withChan: type chan int has no JSON Schema (JSON cannot hold a chan)`},
		{"nested func", reflect.TypeFor[withFunc](), toolschema.Unsupported, "inner.f",
			`property "inner.f" of toolschema_test.withFunc: type func() has no JSON Schema (JSON cannot hold a func)`},
		{"bool map key", reflect.TypeFor[boolKey](), toolschema.Unsupported, "m",
			`property "m" of toolschema_test.boolKey: map key type bool is not a string, an integer or an encoding.TextUnmarshaler`},
		{"empty tag", reflect.TypeFor[emptyTag](), toolschema.BadTag, "x",
			`property "x" of toolschema_test.emptyTag: empty jsonschema tag`},
		{"WORD= tag", reflect.TypeFor[wordTag](), toolschema.BadTag, "x",
			`property "x" of toolschema_test.wordTag: jsonschema tag "description=the x" begins with "WORD=" (the tag is the description)`},
		{"func", reflect.TypeFor[func()](), toolschema.Unsupported, "",
			`type func() has no JSON Schema (JSON cannot hold a func)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := toolschema.Infer(c.typ)
			var te *toolschema.TypeError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, c.reason, te.Reason)
			assert.Equal(t, c.property, te.Property)
			assert.Equal(t, c.typ, te.Type)
			assert.Equal(t, c.msg, err.Error())
		})
	}
}

// For describes any type, not only an arguments object.
func TestFor(t *testing.T) {
	s, err := toolschema.For(reflect.TypeFor[*[]int]())
	require.NoError(t, err)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Equal(t, `{"type":["null","array"],"items":{"type":"integer"}}`, string(b))
}

type (
	address struct {
		City string `json:"city"`
		Zip  string `json:"zip,omitempty"`
	}
	order struct {
		ID     int               `json:"id"`
		Ship   address           `json:"ship"`
		Lines  []line            `json:"lines"`
		Tags   map[string]string `json:"tags,omitempty"`
		Status string            `json:"status"`
		Note   *string           `json:"note,omitempty"`
	}
	line struct {
		SKU string  `json:"sku"`
		Qty float64 `json:"qty"`
	}
)

func TestCheck(t *testing.T) {
	typ := reflect.TypeFor[order]()
	const ok = `"id":{"type":"integer"},"ship":{"type":"object"},"lines":{"type":"array"},"tags":{},"status":{"type":"string"},"note":{}`
	type problem struct {
		kind     toolschema.Kind
		property string
	}
	for _, c := range []struct {
		name     string
		schema   string
		problems []problem
		msg      string
	}{
		{"agrees", `{"type":"object","properties":{` + ok + `},"required":["id","ship"]}`, nil, ""},
		{"types left out", `{"properties":{"id":{},"ship":{},"lines":{},"tags":{},"status":{},"note":true}}`, nil, ""},
		{"number for integer, null in a list, pointer takes null",
			`{"type":"object","properties":{"id":{"type":"number"},"ship":{},"lines":{},"tags":{},"status":{"type":["string","null"]},"note":{"type":"null"}}}`, nil, ""},
		{"nested agrees", `{"type":"object","properties":{"id":{},"ship":{"type":"object","properties":{"city":{"type":"string"},"zip":{}}},"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}},"tags":{"type":"object","additionalProperties":{"type":"string"}},"status":{"enum":["open","shipped"]},"note":{}}}`, nil, ""},
		{"map takes any name", `{"type":"object","properties":{"id":{},"ship":{},"lines":{},"tags":{"properties":{"colour":{"type":"string"}}},"status":{},"note":{}}}`, nil, ""},
		{"unknown property and missing field",
			`{"type":"object","properties":{"order":{"type":"integer"},"ship":{},"lines":{},"tags":{},"status":{},"note":{}}}`,
			[]problem{{toolschema.NoField, "order"}, {toolschema.NotInSchema, "id"}},
			`Parameters disagrees with its argument type: property "order" has no field in toolschema_test.order; field "id" of toolschema_test.order is not in Parameters`},
		{"wrong type",
			`{"type":"object","properties":{` + ok + `,"id":{"type":"string"}}}`,
			[]problem{{toolschema.WrongType, "id"}},
			`Parameters disagrees with its argument type: property "id" is "string", its field encodes as "integer"`},
		{"null for a non-pointer",
			`{"type":"object","properties":{` + ok + `,"status":{"type":"null"}}}`,
			[]problem{{toolschema.WrongType, "status"}},
			`Parameters disagrees with its argument type: property "status" is "null", its field encodes as "string"`},
		{"pointer named in the message",
			`{"type":"object","properties":{` + ok + `,"note":{"type":"boolean"}}}`,
			[]problem{{toolschema.WrongType, "note"}},
			`Parameters disagrees with its argument type: property "note" is "boolean", its field encodes as ["null" "string"]`},
		{"required without field",
			`{"type":"object","properties":{` + ok + `},"required":["id","order_id"]}`,
			[]problem{{toolschema.RequiredNoField, "order_id"}},
			`Parameters disagrees with its argument type: required property "order_id" has no field in toolschema_test.order`},
		{"required and listed without field: once",
			`{"type":"object","properties":{` + ok + `,"order_id":{}},"required":["order_id"]}`,
			[]problem{{toolschema.NoField, "order_id"}},
			`Parameters disagrees with its argument type: property "order_id" has no field in toolschema_test.order`},
		{"enum of the wrong type",
			`{"type":"object","properties":{` + ok + `,"id":{"enum":[1,"two"]}}}`,
			[]problem{{toolschema.WrongEnum, "id"}},
			`Parameters disagrees with its argument type: property "id" has enum value "two", its field encodes as "integer"`},
		{"nested property",
			`{"type":"object","properties":{` + ok + `,"ship":{"type":"object","properties":{"town":{"type":"string"},"zip":{"type":"integer"}}}}}`,
			[]problem{{toolschema.NoField, "ship.town"}, {toolschema.WrongType, "ship.zip"}, {toolschema.NotInSchema, "ship.city"}},
			`Parameters disagrees with its argument type: property "ship.town" has no field in toolschema_test.address; property "ship.zip" is "integer", its field encodes as "string"; field "ship.city" of toolschema_test.address is not in Parameters`},
		{"array items",
			`{"type":"object","properties":{` + ok + `,"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"number"},"qty":{}}}}}}`,
			[]problem{{toolschema.WrongType, "lines[].sku"}},
			`Parameters disagrees with its argument type: property "lines[].sku" is "number", its field encodes as "string"`},
		{"map values",
			`{"type":"object","properties":{` + ok + `,"tags":{"type":"object","additionalProperties":{"type":"integer"}}}}`,
			[]problem{{toolschema.WrongType, "tags.*"}},
			`Parameters disagrees with its argument type: property "tags.*" is "integer", its field encodes as "string"`},
		{"array for an object",
			`{"type":"object","properties":{` + ok + `,"ship":{"type":"array"}}}`,
			[]problem{{toolschema.WrongType, "ship"}},
			`Parameters disagrees with its argument type: property "ship" is "array", its field encodes as "object"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := toolschema.Check(json.RawMessage(c.schema), typ)
			if c.problems == nil {
				assert.NoError(t, err)
				return
			}
			var me *toolschema.MismatchError
			require.ErrorAs(t, err, &me)
			var got []problem
			for _, p := range me.Problems {
				got = append(got, problem{p.Kind, p.Property})
			}
			assert.Equal(t, c.problems, got)
			assert.Equal(t, typ, me.Type)
			assert.Equal(t, c.msg, err.Error())
		})
	}
}

func TestCheckErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		schema string
		typ    reflect.Type
		target any
		msg    string
	}{
		{"not JSON", `{"type":`, reflect.TypeFor[order](), new(*toolschema.SchemaError),
			`Parameters is not a JSON Schema: unexpected end of JSON input`},
		{"not an object", `["type"]`, reflect.TypeFor[order](), new(*toolschema.SchemaError),
			`Parameters is not a JSON Schema: ["type"] is not a JSON object`},
		{"bad type", `{"type":3}`, reflect.TypeFor[order](), new(*toolschema.SchemaError),
			`Parameters is not a JSON Schema: "type" is 3, not a type name or a list of them`},
		{"bad nested", `{"properties":{"id":[]}}`, reflect.TypeFor[order](), new(*toolschema.SchemaError),
			`Parameters is not a JSON Schema: property "id": [] is not a JSON object`},
		{"describes an array", `{"type":"array"}`, reflect.TypeFor[order](), new(*toolschema.SchemaError),
			`Parameters describes a JSON array, not an object`},
		{"type is not an object", `{"type":"object"}`, reflect.TypeFor[[]int](), new(*toolschema.TypeError),
			`arguments of type []int are "array", not a JSON object`},
		{"named field JSON cannot hold", `{"properties":{"c":{"type":"string"}}}`, reflect.TypeFor[withChan](), new(*toolschema.TypeError),
			`property "c" of toolschema_test.withChan: type chan int has no JSON Schema (JSON cannot hold a chan)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := toolschema.Check(json.RawMessage(c.schema), c.typ)
			require.Error(t, err)
			assert.True(t, errors.As(err, c.target), "%T", err)
			assert.Equal(t, c.msg, err.Error())
		})
	}
}

// A recursive type has no inferred schema, but one written by hand is
// checked as deep as it goes; any and maps take any object.
func TestCheckOpenTypes(t *testing.T) {
	assert.NoError(t, toolschema.Check(json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"type":"object","properties":{"name":{},"children":{}}}}}}`), reflect.TypeFor[node]()))
	err := toolschema.Check(json.RawMessage(`{"type":"object","properties":{"name":{},"children":{"type":"array","items":{"type":"object","properties":{"nom":{},"name":{},"children":{}}}}}}`), reflect.TypeFor[node]())
	var me *toolschema.MismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "children[].nom", me.Problems[0].Property)
	for _, typ := range []reflect.Type{reflect.TypeFor[any](), reflect.TypeFor[json.RawMessage](), reflect.TypeFor[map[string]any]()} {
		assert.NoError(t, toolschema.Check(json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}`), typ), typ.String())
		assert.NoError(t, toolschema.Check(json.RawMessage(`{"type":"object"}`), typ), typ.String())
	}
}

// The properties are the keys encoding/json writes for a value of the
// type: every required one, and no other.
func TestPropertiesAreEncodingJSONKeys(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[refund](), reflect.TypeFor[scalars](), reflect.TypeFor[skipped](),
		reflect.TypeFor[embeds](), reflect.TypeFor[ambiguous](), reflect.TypeFor[tagWins](), reflect.TypeFor[named]()} {
		s, err := toolschema.Arguments(typ)
		require.NoError(t, err)
		v := reflect.New(typ)
		if typ == reflect.TypeFor[embeds]() {
			v.Interface().(*embeds).Inner = &Inner{Depth: 1}
		}
		b, err := json.Marshal(v.Interface())
		require.NoError(t, err)
		var keys map[string]any
		require.NoError(t, json.Unmarshal(b, &keys))
		for _, r := range s.Required {
			assert.Contains(t, keys, r, typ.String())
		}
		for k := range keys {
			assert.Contains(t, s.Properties, k, typ.String())
		}
	}
}
