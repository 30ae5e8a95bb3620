package agentrun_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// The JSON Schemas of the wire protocol (docs/schemas) name exactly the
// fields of the Go types: a field added, renamed or dropped on one side
// fails here. Outputs list as required exactly the fields always written;
// inputs refuse what they do not name.
func TestProtocolSchemas(t *testing.T) {
	cases := []struct {
		file  string
		typ   any
		input bool
	}{
		{"run-input.json", agentrun.RunInput{}, true},
		{"resume-input.json", agentrun.ResumeInput{}, true},
		{"hooks-input.json", agentrun.HooksInput{}, true},
		{"run-result.json", agentrun.RunResult{}, false},
		{"trace-line.json", agentrun.TraceLine{}, false},
		{"interrupt.json", agentrun.Interrupt{}, false},
		{"resume-result.json", agentrun.ResumeResult{}, false},
		{"tool-call.json", threadstate.ToolCall{}, false},
		{"message.json", threadstate.Message{}, false},
		{"checkpoint.json", threadstate.Checkpoint{}, false},
		{"record.json", dedup.Record{}, false},
		{"page-request.json", threadstate.PageRequest{}, true},
		{"page.json", agentrun.Page{}, false},
		{"near-miss.json", dedup.NearMiss{}, false},
		{"call-item.json", agentrun.CallItem{}, false},
		{"text-item.json", protocol.TextItem{}, false},
	}
	files, err := filepath.Glob("../../docs/schemas/*.json")
	require.NoError(t, err)
	assert.Len(t, files, len(cases), "every schema is checked")
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("../../docs/schemas", c.file))
			require.NoError(t, err)
			var schema struct {
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			}
			require.NoError(t, json.Unmarshal(b, &schema))
			all, always := fields(reflect.TypeOf(c.typ))
			assert.ElementsMatch(t, all, slices.Collect(mapKeys(schema.Properties)), "properties")
			for _, r := range schema.Required {
				assert.Contains(t, all, r, "required names a field")
			}
			if c.input {
				require.NotNil(t, schema.AdditionalProperties)
				assert.False(t, *schema.AdditionalProperties, "inputs refuse unknown fields")
			} else {
				assert.ElementsMatch(t, always, schema.Required, "required = the fields always written")
			}
		})
	}
}

func mapKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// fields lists a struct's JSON field names, and those without omitempty.
func fields(t reflect.Type) (all, always []string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && f.Tag.Get("json") == "" {
			a, w := fields(f.Type)
			all, always = append(all, a...), append(always, w...)
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	return all, always
}
