package cli

import (
	"testing"

	"github.com/tulip-temporal/tulip/internal/threadstate"

	"github.com/stretchr/testify/assert"
)

func asst(text string, calls ...threadstate.ToolCall) threadstate.Message {
	return threadstate.Message{Role: "assistant", Content: text, ToolCalls: calls}
}

func call(name, args string) threadstate.ToolCall {
	return threadstate.ToolCall{ID: "c", Name: name, Arguments: args}
}

func user(text string) threadstate.Message { return threadstate.Message{Role: "user", Content: text} }

func tool(text string) threadstate.Message { return threadstate.Message{Role: "tool", Content: text} }

// Only user messages after a final answer start runs: a resume's answer
// (after the held calls' tool messages) does not.
func TestLaterRuns(t *testing.T) {
	msgs := []threadstate.Message{user("refund ord-1"), asst("", call("issue_refund", `{}`)), tool(`{"error":"not performed: no"}`),
		user("no"), asst("ok"), user("and ord-2?"), asst("", call("lookup_order", `{}`)), tool("{}"), asst("done"), user("thanks")}
	assert.Equal(t, []string{"and ord-2?", "thanks"}, laterRuns(msgs))
	assert.Empty(t, laterRuns(msgs[:3]))
}

func TestCompare(t *testing.T) {
	origin := []threadstate.Message{user("x"), asst("", call("lookup", `{"id":1}`)), tool("{}"), asst("", call("refund", `{"id":1,"amount":20}`)), tool("{}"), asst("refunded")}
	for _, tc := range []struct {
		name      string
		fork      []threadstate.Message
		verdict   string
		at        int
		newCalls  int
		gone      int
		diffPaths []string
	}{
		{"same calls, other words", []threadstate.Message{user("x"), asst("", call("lookup", `{"id":1.0}`)), tool("{}"), asst("", call("refund", `{"amount":20,"id":1}`)), tool("{}"), asst("all done")},
			"identical", 0, 0, 0, nil},
		{"other amount", []threadstate.Message{user("x"), asst("", call("lookup", `{"id":1}`)), tool("{}"), asst("", call("refund", `{"id":1,"amount":25}`)), tool("{}"), asst("refunded")},
			"diverged", 2, 1, 1, []string{"/amount"}},
		{"answers early", []threadstate.Message{user("x"), asst("", call("lookup", `{"id":1}`)), tool("{}"), asst("no refund")},
			"diverged", 2, 0, 1, nil},
		{"one more call", []threadstate.Message{user("x"), asst("", call("lookup", `{"id":1}`), call("page", `{}`)), tool("{}"), tool("{}"), asst("", call("refund", `{"id":1,"amount":20}`)), tool("{}"), asst("refunded")},
			"diverged", 1, 1, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &evalReport{Answers: map[string]string{}}
			compare(rep, origin, tc.fork)
			assert.Equal(t, tc.verdict, rep.Verdict)
			assert.Equal(t, tc.at, rep.DivergedAt)
			assert.Len(t, rep.NewCalls, tc.newCalls)
			assert.Len(t, rep.NoLongerMade, tc.gone)
			var paths []string
			if rep.FirstDifference != nil {
				for _, d := range rep.FirstDifference.Differences {
					paths = append(paths, d.Path)
				}
			}
			assert.Equal(t, tc.diffPaths, paths)
		})
	}
}
