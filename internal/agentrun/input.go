package agentrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// decodeStrict decodes the JSON object data into v (a pointer to a struct)
// and refuses, with protocol.ErrBadInput naming the field, any field v
// does not have: a misspelled field ("threadId") must never be dropped in
// silence. what names the input in the message.
func decodeStrict(what string, data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return badInput(what + " is missing")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return badInput(fmt.Sprintf("%s is not a JSON object", what))
	}
	known := fieldsOf(reflect.TypeOf(v).Elem())
	var unknown []string
	for name := range fields {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		named := make([]string, len(unknown))
		for i, name := range unknown {
			named[i] = fmt.Sprintf("%q", name)
			if s := snakeCase(name); s != name && known[s] {
				named[i] += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		noun := "field"
		if len(unknown) > 1 {
			noun = "fields"
		}
		return badInput(fmt.Sprintf("%s: unknown %s %s", what, noun, strings.Join(named, ", ")))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badInput(fmt.Sprintf("%s: %v", what, err))
	}
	return nil
}

// fieldsOf is jsonFields of t, made once a type: every run decodes its
// input, on every replay too.
func fieldsOf(t reflect.Type) map[string]bool {
	if known, ok := knownFields.Load(t); ok {
		return known.(map[string]bool)
	}
	known, _ := knownFields.LoadOrStore(t, jsonFields(t))
	return known.(map[string]bool)
}

var knownFields sync.Map // reflect.Type → map[string]bool, never written once stored

// jsonFields lists the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = true
	}
	return out
}

// snakeCase turns "threadId" or "ThreadID" into "thread_id".
func snakeCase(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 && (rs[i-1] < 'A' || rs[i-1] > 'Z' || (i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z')) {
			b.WriteByte('_')
		}
		if upper {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
