package activities

import (
	"bytes"
	"encoding/json"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/internal/jsonenc"
)

// A tool call's input is encoded, and its output decoded, in workflow
// code: for every call, on every replay too. The workflow hands the SDK
// these two types, whose JSON is ToolInput's and ToolOutput's, written
// and read without reflection (TestToolInputJSON, TestToolOutputJSON hold
// them to encoding/json); the input goes as the payload the SDK's JSON
// converter would make of it (Payload). The public types keep no
// methods, so a type that embeds them encodes as before.

// ToolInputJSON is a ToolInput as the workflow passes it to a tool
// activity.
type ToolInputJSON ToolInput

// Payload is in as the SDK's JSON payload converter writes a ToolInput
// (encoding json/plain), to pass to ExecuteActivity: the SDK skips its
// payload converters for a RawValue (each tries the value in turn, by
// reflection) and still applies the data converter's codec.
func (in ToolInputJSON) Payload() converter.RawValue {
	b, _ := in.MarshalJSON() // never fails
	return JSONPayload(b)
}

// JSONPayload is the payload the SDK's JSON payload converter makes of a
// value whose JSON is data (encoding json/plain), as a RawValue: workflow
// code that writes a value's JSON itself hands it to the SDK so (the SDK
// skips its converters, its codec still applies).
func JSONPayload(data []byte) converter.RawValue {
	return converter.NewRawValue(&commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: jsonPlain}, Data: data})
}

// jsonPlain is the JSON payload converter's encoding (shared: payloads'
// metadata is never written to).
var jsonPlain = []byte(converter.MetadataEncodingJSON)

// ToolOutputJSON is a ToolOutput as the workflow reads it from a tool
// activity's future.
type ToolOutputJSON ToolOutput

// MarshalJSON writes in as json.Marshal writes a ToolInput.
func (in ToolInputJSON) MarshalJSON() ([]byte, error) {
	n := 96 + len(in.Tool) + len(in.CallID) + len(in.Arguments) + len(in.IdempotencyKey) + len(in.Agent) + len(in.Thread) + len(in.Toolset)
	b := make([]byte, 0, n+n/8)
	b = append(b, `{"tool":`...)
	b = jsonenc.AppendString(b, in.Tool)
	b = append(b, `,"call_id":`...)
	b = jsonenc.AppendString(b, in.CallID)
	b = append(b, `,"arguments":`...)
	b = jsonenc.AppendString(b, in.Arguments)
	b = append(b, `,"idempotency_key":`...)
	b = jsonenc.AppendString(b, in.IdempotencyKey)
	b = append(b, `,"agent":`...)
	b = jsonenc.AppendString(b, in.Agent)
	if in.Thread != "" {
		b = append(b, `,"thread":`...)
		b = jsonenc.AppendString(b, in.Thread)
	}
	if in.Toolset != "" {
		b = append(b, `,"toolset":`...)
		b = jsonenc.AppendString(b, in.Toolset)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads a tool output as json.Unmarshal reads a
// ToolOutput. encoding/json has checked that data is one valid JSON value
// before it calls this; what a tool activity writes ({"result":...}, and
// "result_in" after it, no whitespace around the value) is read by a
// scan, anything else by encoding/json.
func (o *ToolOutputJSON) UnmarshalJSON(data []byte) error {
	if out, ok := scanToolOutput(data); ok {
		*o = ToolOutputJSON(out)
		return nil
	}
	return json.Unmarshal(data, (*ToolOutput)(o))
}

// ReadToolOutput reads a tool activity's result payload (a future's
// RawValue, after the data converter's codec) as the SDK's JSON payload
// converter decodes it into a ToolOutputJSON, when it is JSON (json/plain)
// in the shape a tool activity writes: one scan to check it, one to read
// it, where json.Unmarshal scans it twice before UnmarshalJSON. ok false:
// decode it through the data converter.
func ReadToolOutput(p *commonpb.Payload) (out ToolOutput, ok bool) {
	if p == nil || string(p.GetMetadata()[converter.MetadataEncoding]) != converter.MetadataEncodingJSON || !json.Valid(p.GetData()) {
		return ToolOutput{}, false
	}
	return scanToolOutput(p.GetData())
}

// scanToolOutput reads data, one valid JSON value, when it is what a tool
// activity writes ({"result":...}, and "result_in" after it, no
// whitespace around the value).
func scanToolOutput(data []byte) (ToolOutput, bool) {
	const head = `{"result":`
	if !bytes.HasPrefix(data, []byte(head)) || len(data) <= len(head) || isJSONSpace(data[len(head)]) {
		return ToolOutput{}, false
	}
	end := skipJSONValue(data, len(head))
	if isJSONSpace(data[end-1]) {
		return ToolOutput{}, false // whitespace after the value: encoding/json leaves it out
	}
	switch rest := data[end:]; {
	case len(rest) == 1 && rest[0] == '}':
		return ToolOutput{Result: append(json.RawMessage(nil), data[len(head):end]...)}, true
	case bytes.HasPrefix(rest, []byte(`,"result_in":`)) && rest[len(rest)-1] == '}':
		if n, err := strconv.Atoi(string(rest[len(`,"result_in":`) : len(rest)-1])); err == nil {
			return ToolOutput{Result: append(json.RawMessage(nil), data[len(head):end]...), ResultIn: &n}, true
		}
	}
	return ToolOutput{}, false
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipJSONValue returns where the JSON value that starts at data[i] ends.
// data must be valid JSON with no whitespace between i and the value's
// end (what json.Marshal writes); for anything else it returns an index
// that the caller's checks refuse.
func skipJSONValue(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(data) && (data[i] == ',' || data[i] == '}' || data[i] == ']') {
			return i
		}
	}
	return i
}
