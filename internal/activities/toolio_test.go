package activities

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// jsonPieces are texts with every escape encoding/json writes.
var jsonPieces = []string{"", "a", "hello world", `"`, `\`, "\b\f\n\r\t", "\x00\x01\x1f", "<script>&</script>", "\u2028\u2029",
	"é", "日本", "😀", "\xff", "\xed\xa0\x80", "\xe2\x80", "{\"order_id\": \"ord-1\", \"amount\": 120.0}", "\x7f", "}", ",", `"result_in":`}

func randomText(rng *rand.Rand) string {
	s := ""
	for range rng.IntN(5) {
		s += jsonPieces[rng.IntN(len(jsonPieces))]
	}
	return s
}

func TestToolInputJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		in := ToolInput{Tool: randomText(rng), CallID: randomText(rng), Arguments: randomText(rng), IdempotencyKey: randomText(rng),
			Agent: randomText(rng), Thread: randomText(rng), Toolset: randomText(rng)}
		want, err := json.Marshal(in)
		require.NoError(t, err)
		got, err := json.Marshal(ToolInputJSON(in))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "input %d", i)
		if i%100 == 0 {
			sdk, err := converter.GetDefaultDataConverter().ToPayload(in)
			require.NoError(t, err)
			require.True(t, proto.Equal(sdk, ToolInputJSON(in).Payload().Payload()), "input %d: the SDK's payload", i)
		}
	}
}

func TestToolOutputJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	values := func() json.RawMessage {
		switch rng.IntN(8) {
		case 0:
			return nil
		case 1:
			return json.RawMessage(`120.5`)
		case 2:
			return json.RawMessage(`true`)
		case 3:
			return json.RawMessage(`[1,[2,{"a":"}]"}],[]]`)
		}
		v := map[string]any{"text": randomText(rng), "n": rng.IntN(100), "list": []any{randomText(rng), nil, false, map[string]any{"x": randomText(rng)}}}
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b
	}
	check := func(i int, data []byte) {
		var want ToolOutput
		wantErr := json.Unmarshal(data, &want)
		var got ToolOutputJSON
		gotErr := json.Unmarshal(data, &got)
		require.Equal(t, wantErr != nil, gotErr != nil, "output %d: %s", i, data)
		require.Equal(t, want, ToolOutput(got), "output %d: %s", i, data)
		// Read from a payload: what it reads is what the JSON converter
		// decodes, and what does not decode is never read.
		read, ok := ReadToolOutput(JSONPayload(data).Payload())
		if ok {
			require.NoError(t, wantErr, "output %d: %s", i, data)
			require.Equal(t, want, read, "output %d: %s", i, data)
		}
		if i >= 0 { // json.Marshal's: the shape a tool activity writes
			require.True(t, ok, "output %d: %s", i, data)
		}
	}
	for i := range 20000 {
		out := ToolOutput{Result: values()}
		if rng.IntN(3) == 0 {
			n := rng.IntN(5000) - 10
			out.ResultIn = &n
		}
		data, err := json.Marshal(out)
		require.NoError(t, err)
		check(i, data)
	}
	// What a tool activity does not write goes to encoding/json.
	for i, data := range []string{`{}`, `{"result_in":3,"result":1}`, `{ "result": 1 }`, `{"result":1,"other":2}`, `{"result":1,"result_in":1.5}`,
		`{"result":"a","result_in":-2}`, `null`, `{"result":{"result_in":4}}`, `{"result":[1,2],"result_in":7}`,
		`{"result": 1}`, `{"result":1 }`, `{"result":{"a": 1} }`, "{\"result\":[1]\n}", `{"result":true ,"result_in":2}`, `{"result":1,"result_in": 3}`} {
		check(-i-1, []byte(data))
	}
	// Invalid JSON is never read from a payload (the converter's error is
	// the call's), nor a payload of another encoding.
	for _, data := range []string{`{"result":{bad}}`, `{"result":1`, `{"result":"a}`, `{"result":01}`, "{\"result\":\"\x01\"}", `{"result":1}}`} {
		_, ok := ReadToolOutput(JSONPayload([]byte(data)).Payload())
		require.False(t, ok, data)
	}
	p := JSONPayload([]byte(`{"result":1}`)).Payload()
	p.Metadata = map[string][]byte{converter.MetadataEncoding: []byte("binary/encrypted")}
	_, ok := ReadToolOutput(p)
	require.False(t, ok)
}
