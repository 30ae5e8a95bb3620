package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// frameworkModel is the scripted OpenAI-compatible (chat completions)
// upstream model behind 'tulip serve' for the agent-framework tests. It
// answers from the conversation:
//   - the last message a user's "refund ord-N": an issue_refund call for
//     ord-N (amount 20);
//   - the last message a user's "isolate HOST": an isolate_host call for
//     HOST;
//   - the last message a user's asking about the weather while a tool
//     named lookup_weather is offered: a lookup_weather call for Paris;
//   - lookup_weather's result since the model's last message (the last
//     message, or a message follows it): "The weather in Paris: RESULT";
//   - isolate_host's result since the model's last message (an
//     approval's answer follows it): "Host isolation: RESULT";
//   - anything else (another tool's result): "Done: all settled.".
//
// Every answer reports usage: prompt_tokens 100 plus the number of
// messages it was sent, completion_tokens 7; the model sums what it
// reported (total), for the frameworks' usage to be compared against.
type frameworkModel struct {
	*httptest.Server
	mu                 sync.Mutex
	prompt, completion int64
	bodies             []map[string]any
	said               []string // the tool messages the model was sent
}

// toldModel reports whether a tool message the model was sent, after the
// first from of them, contains s.
func (m *frameworkModel) toldModel(from int, s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.said[min(from, len(m.said)):] {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

func newFrameworkModel(t *testing.T) *frameworkModel {
	m := &frameworkModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

// total is what the model has reported so far: prompt and completion
// tokens.
func (m *frameworkModel) total() (int64, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prompt, m.completion
}

func (m *frameworkModel) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []map[string]any `json:"messages"`
		Tools    []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, fmt.Sprintf("bad request: %v", err), http.StatusBadRequest)
		return
	}
	offered := map[string]bool{}
	for _, tl := range body.Tools {
		offered[tl.Function.Name] = true
	}
	last := body.Messages[len(body.Messages)-1]
	role, _ := last["role"].(string)
	content := messageText(last["content"])
	// result is the last tool result since the model's last message (a
	// user's message may follow it: an approval's answer).
	var result map[string]any
	for i := len(body.Messages) - 1; i >= 0 && body.Messages[i]["role"] != "assistant"; i-- {
		if body.Messages[i]["role"] == "tool" {
			result = body.Messages[i]
			break
		}
	}

	var call [3]string
	text := "Done: all settled."
	switch {
	case role == "user" && refundRE.MatchString(content):
		call = [3]string{"call-refund", "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":20}`, refundRE.FindStringSubmatch(content)[1])}
	case role == "user" && isolateRE.MatchString(content):
		call = [3]string{"call-isolate", "isolate_host", fmt.Sprintf(`{"host":%q}`, isolateRE.FindStringSubmatch(content)[1])}
	case role == "user" && strings.Contains(strings.ToLower(content), "weather") && offered["lookup_weather"]:
		call = [3]string{"call-weather", "lookup_weather", `{"city":"Paris"}`}
	case toolCallName(body.Messages, result) == "lookup_weather":
		text = "The weather in Paris: " + messageText(result["content"])
	case toolCallName(body.Messages, result) == "isolate_host":
		text = "Host isolation: " + messageText(result["content"])
	}
	prompt, completion := int64(100+len(body.Messages)), int64(7)
	m.mu.Lock()
	for _, msg := range body.Messages {
		if msg["role"] == "tool" {
			m.said = append(m.said, messageText(msg["content"]))
		}
	}
	m.prompt += prompt
	m.completion += completion
	m.mu.Unlock()
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

	message := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	if call[1] != "" {
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": call[0], "type": "function", "function": map[string]any{"name": call[1], "arguments": call[2]}}}}
		finish = "tool_calls"
	}
	if !body.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-fw", "object": "chat.completion", "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(v map[string]any) {
		v["id"], v["object"], v["model"] = "chatcmpl-fw", "chat.completion.chunk", "scripted"
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if call[1] != "" {
		chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"index": 0, "id": call[0], "type": "function", "function": map[string]any{"name": call[1], "arguments": call[2]}}}}}}})
	} else {
		for _, p := range strings.SplitAfter(text, " ") {
			chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": p}}}})
		}
	}
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
	chunk(map[string]any{"choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// isolateRE reads a user's "isolate HOST".
var isolateRE = regexp.MustCompile(`isolate ([\w.-]+)`)

// messageText is a chat message's content as text (a string, or the text
// parts of a list).
func messageText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, p := range v {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

// toolCallName names the tool whose call the tool message answers.
func toolCallName(msgs []map[string]any, tool map[string]any) string {
	id, _ := tool["tool_call_id"].(string)
	for _, m := range msgs {
		calls, _ := m["tool_calls"].([]any)
		for _, c := range calls {
			cm, _ := c.(map[string]any)
			if cm["id"] == id {
				fn, _ := cm["function"].(map[string]any)
				name, _ := fn["name"].(string)
				return name
			}
		}
	}
	return ""
}

// frameworksDir is tests/frameworks with its npm packages: the test is
// skipped without node; without node_modules it installs them with npm ci
// (as scripts/install-test-deps does) and fails if that fails.
func frameworksDir(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the agent-framework tests drive npm packages (tests/frameworks)")
	}
	dir, err = filepath.Abs("frameworks")
	require.NoError(t, err)
	for _, m := range []string{"ai", "@ai-sdk/openai", "@openai/agents", "langchain", "@langchain/openai", "@langchain/core", "openai", "zod"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", m)); err == nil {
			continue
		}
		npm, err := exec.LookPath("npm")
		require.NoError(t, err, "npm is needed to install tests/frameworks's packages (or run scripts/install-test-deps)")
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in tests/frameworks: %s", out)
		break
	}
	return node, dir
}

// fwResult is what a framework script prints.
type fwResult struct {
	Text  string `json:"text"`
	Error *struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
		Name    string `json:"name"`
	} `json:"error"`
	Calls       int      `json:"calls"`
	Steps       int      `json:"steps"`
	ToolCalls   []string `json:"toolCalls"`
	ServerCalls []string `json:"serverCalls"`
	Items       []struct {
		Type, Raw, Name string
	} `json:"items"`
	Turns []struct {
		Text        string   `json:"text"`
		ToolCalls   []string `json:"toolCalls"`
		Invalid     int      `json:"invalid"`
		ToolOutputs []string `json:"toolOutputs"`
	} `json:"turns"`
	Usage struct {
		Input, Output, Total int64
	} `json:"usage"`
	// Texts are each turn's (or run's) answer text.
	Texts []string `json:"texts"`
	// Approvals name the calls whose approval the framework was asked;
	// Interruptions the Agents SDK's.
	Approvals     []string `json:"approvals"`
	Interruptions []string `json:"interruptions"`
	// onestep: the next turn's requests refused with 409, the status of
	// the last, and how long from the first to the last.
	Refused     int   `json:"refused"`
	FinalStatus int   `json:"finalStatus"`
	WaitedMs    int64 `json:"waitedMs"`
	// Requests are what the framework sent the server and what it
	// answered (common.mjs's tap).
	Requests []fwRequest `json:"requests"`
}

// fwRequest is one request a framework sent 'tulip serve' and its answer.
type fwRequest struct {
	Path   string `json:"path"`
	Status int    `json:"status"`
	// Prev: the request named previous_response_id.
	Prev bool `json:"prev"`
	// Input are its input items' (or messages') types: message:ROLE[:PART
	// TYPES], or the item's type.
	Input []string `json:"input"`
	// ResponseStatus and Output (item types) are the response's;
	// Outcomes the agent's calls in it as NAME:OUTCOME (tulip.outcome).
	ResponseStatus string   `json:"responseStatus"`
	Output         []string `json:"output"`
	Outcomes       []string `json:"outcomes"`
	// A refused request's bodies.
	RequestBody  string `json:"requestBody"`
	ResponseBody string `json:"responseBody"`
}

// sent are the framework's requests to path (/responses,
// /chat/completions).
func (r fwResult) sent(path string) []fwRequest {
	var out []fwRequest
	for _, q := range r.Requests {
		if q.Path == path {
			out = append(out, q)
		}
	}
	return out
}

// TestServeFrameworks drives 'tulip serve' (an embedded server in --db,
// --no-worker; the worker runs in this test with the scripted upstream
// frameworkModel and the billing witness) with the agent frameworks
// people point at an OpenAI-compatible server, each from npm
// (tests/frameworks, exact versions in its package-lock.json):
//   - the Vercel AI SDK (generateText and streamText, stepCountIs(3),
//     through openai.responses and openai.chat): "refund ord-N" runs the
//     agent's issue_refund once (billing refunds ord-N once) and returns
//     the answer without an error and without a client-side tool call
//     (the server-run call is no function_call); a client tool named
//     issue_refund is refused with a 400 naming it, and its execute never
//     ran; a client tool lookup_weather the model calls runs once in the
//     framework and the loop completes across two requests with an
//     answer quoting its result;
//   - the OpenAI Agents SDK (run, streamed and not): the refund run
//     completes with one refund billed; the lookup_weather run executes
//     the function tool once and completes;
//   - LangChain.js ChatOpenAI over the Responses API (invoke, streamed and
//     not): the AIMessage for "refund ord-N" has no tool_calls, has the
//     text, and billing refunded once; the lookup_weather loop completes;
//   - usage: each framework's reported input/output tokens equal the sums
//     the upstream reported for its requests;
//   - multiturn, each framework continuing a conversation its own way,
//     resending it without previous_response_id (the AI SDK's
//     item_references, the Agents SDK's result.history, LangChain
//     createAgent's messages; AI SDK chat: the messages and
//     X-Tulip-Thread): the second turn's repeated refund is served from
//     the thread's log (outcome cached) and billing refunded once;
//   - approve and decline (serve's --hooks approve_isolate_host holds
//     isolate_host; Responses API): the response asking approval is
//     completed with an mcp_approval_request last, each framework answers
//     it its own documented way (the AI SDK's tool-approval-response, the
//     Agents SDK's interruptions and state.approve / state.reject,
//     LangChain's mcp_approval_response content block), and isolate_host
//     ran once (approved) or never (declined), the model answering either
//     way;
//   - onestep (AI SDK): a client tool with the default stopWhen (one
//     step) and metadata tulip_client_timeout 3s: the SDK runs the tool,
//     the step ends, and the next turn (the conversation, as the SDK keeps
//     it, with "thanks") is refused 409 while the run holds the call, then
//     taken once the call expired, within 20 s.
func TestServeFrameworks(t *testing.T) {
	node, dir := frameworksDir(t)
	m := newFrameworkModel(t)
	tq := taskQueue(t.Name())
	base, out := startServe(t, "--db", filepath.Join(t.TempDir(), "serve.db"), "--no-worker", "--task-queue", tq, "--hooks", "approve_isolate_host")
	addr := temporalRE.FindStringSubmatch(out.String())
	require.NotNil(t, addr, "serve prints its embedded server's address: %s", out.String())
	bill, tb := billedToolbox(t)
	om, err := openaimodel.New(openaimodel.Options{BaseURL: m.URL + "/v1", Model: "scripted"})
	require.NoError(t, err)
	startWorker(t, dial(t, addr[1]), tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"openai": activities.PublicModel(om)}})

	order := 100
	// script runs a framework script and returns what it printed and the
	// upstream's usage meanwhile.
	script := func(t *testing.T, name string, args ...string) (fwResult, int64, int64) {
		t.Helper()
		p0, c0 := m.total()
		cmd := exec.CommandContext(ctxT(t), node, append([]string{filepath.Join(dir, name), base + "/v1"}, args...)...)
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		stdout, err := cmd.Output()
		require.NoError(t, err, "%s %v: %s", name, args, stdout)
		var got fwResult
		require.NoError(t, json.Unmarshal(stdout, &got), "%s", stdout)
		t.Logf("%s %v: %s", name, args, strings.TrimSpace(string(stdout)))
		p1, c1 := m.total()
		return got, p1 - p0, c1 - c0
	}
	refunds := func(orderID string) int {
		n := 0
		for _, r := range bill.Refunds() {
			if r.OrderID == orderID {
				n++
			}
		}
		return n
	}
	noError := func(t *testing.T, got fwResult) {
		t.Helper()
		if got.Error != nil {
			for _, q := range got.Requests {
				if q.Status >= 400 && q.Status != http.StatusConflict {
					t.Logf("refused: POST %s %d\nrequest: %s\nanswer: %s", q.Path, q.Status, q.RequestBody, q.ResponseBody)
				}
			}
			t.Fatalf("the framework failed: %d %s (%s)", got.Error.Status, got.Error.Message, got.Error.Name)
		}
	}
	// multiturn checks a "multiturn" run: two turns, the second resending
	// the first (no previous_response_id) with "are you sure? refund o";
	// the thread served the repeated refund from its log, and billing
	// refunded o once. resent is an input item type the second request
	// holds (how the framework resends the first turn's answer).
	multiturn := func(t *testing.T, got fwResult, o, path, resent string) {
		t.Helper()
		noError(t, got)
		assert.Equal(t, []string{"Done: all settled.", "Done: all settled."}, got.Texts, "both turns answered")
		assert.Equal(t, 1, refunds(o), "billing refunded %s once across both turns", o)
		reqs := got.sent(path)
		require.Len(t, reqs, 2, "one request a turn: %+v", got.Requests)
		for _, q := range reqs {
			assert.Equal(t, 200, q.Status)
			assert.False(t, q.Prev, "the framework resends the history, without previous_response_id")
		}
		assert.Equal(t, []string{"issue_refund:executed"}, reqs[0].Outcomes, "turn 1 ran the refund")
		assert.Equal(t, []string{"issue_refund:cached"}, reqs[1].Outcomes, "turn 2's repeat was served from the thread's log")
		assert.Contains(t, reqs[1].Input, resent, "turn 2 resent turn 1: %v", reqs[1].Input)
	}
	// approval checks an "approve" or "decline" run of "isolate host": the
	// first response asks approval (completed, its last item an
	// mcp_approval_request), the framework answered it, and isolate_host
	// ran once (approve: its outcome dangling, the answer its result) or
	// never (decline: dropped, the answer says not performed).
	approval := func(t *testing.T, got fwResult, host string, approve bool, before int) {
		t.Helper()
		noError(t, got)
		ran := tb.Invocations()["isolate_host"] - before
		reqs := got.sent("/responses")
		require.Len(t, reqs, 2, "the request, then the approval's answer: %+v", got.Requests)
		assert.Equal(t, 200, reqs[0].Status)
		assert.Equal(t, "completed", reqs[0].ResponseStatus, "a response asking approval is completed")
		if assert.NotEmpty(t, reqs[0].Output) {
			assert.Equal(t, "mcp_approval_request", reqs[0].Output[len(reqs[0].Output)-1], "its last item asks approval")
		}
		assert.Equal(t, 200, reqs[1].Status)
		assert.Equal(t, "completed", reqs[1].ResponseStatus)
		if approve {
			assert.Equal(t, 1, ran, "isolate_host ran once, approved")
			assert.Contains(t, reqs[1].Outcomes, "isolate_host:dangling", "the held call ran")
			assert.Equal(t, fmt.Sprintf(`Host isolation: {"isolated":%q}`, host), got.Text, "the model's answer quotes the call's result")
		} else {
			assert.Equal(t, 0, ran, "isolate_host never ran, declined")
			assert.Contains(t, reqs[1].Outcomes, "isolate_host:dropped", "the held call was dropped")
			assert.Contains(t, got.Text, "Host isolation: ", "the model answered")
			assert.Contains(t, got.Text, "not performed", "the model was told the call did not run")
		}
	}
	usage := func(t *testing.T, got fwResult, prompt, completion int64) {
		t.Helper()
		assert.Positive(t, prompt, "the upstream was asked")
		assert.Equal(t, prompt, got.Usage.Input, "input tokens: the upstream's prompt tokens summed")
		assert.Equal(t, completion, got.Usage.Output, "output tokens: the upstream's completion tokens summed")
		assert.Equal(t, prompt+completion, got.Usage.Total, "total tokens")
	}

	for _, api := range []string{"responses", "chat"} {
		for _, mode := range []string{"generate", "stream"} {
			t.Run("aisdk "+api+" "+mode, func(t *testing.T) {
				t.Run("server tool", func(t *testing.T) {
					order++
					o := fmt.Sprintf("ord-%d", order)
					got, prompt, completion := script(t, "aisdk.mjs", api, mode, "refund", o)
					noError(t, got)
					assert.Equal(t, "Done: all settled.", got.Text)
					assert.Empty(t, got.ToolCalls, "no client-side tool call: the agent's refund is not a function_call")
					if api == "responses" {
						assert.Equal(t, []string{"mcp.issue_refund"}, got.ServerCalls, "the refund shows as a provider-executed (mcp_call) tool call")
					} else {
						assert.Empty(t, got.ServerCalls, "chat completions shows no tool call")
					}
					assert.Equal(t, 1, got.Steps, "one step: nothing for the framework to run")
					assert.Equal(t, 1, refunds(o), "billing refunded %s once", o)
					usage(t, got, prompt, completion)
				})
				t.Run("client tool collides", func(t *testing.T) {
					order++
					o := fmt.Sprintf("ord-%d", order)
					got, _, _ := script(t, "aisdk.mjs", api, mode, "collide", o)
					require.NotNil(t, got.Error, "a client tool named like the agent's is refused: %+v", got)
					assert.Equal(t, 400, got.Error.Status, "%s", got.Error.Message)
					assert.Contains(t, got.Error.Message, "issue_refund")
					assert.Equal(t, 0, got.Calls, "the client's issue_refund never ran")
					assert.Equal(t, 0, refunds(o), "billing refunded nothing")
				})
				t.Run("client tool", func(t *testing.T) {
					order++
					got, prompt, completion := script(t, "aisdk.mjs", api, mode, "client", fmt.Sprintf("ord-%d", order))
					noError(t, got)
					assert.Equal(t, 1, got.Calls, "the framework ran lookup_weather once")
					assert.Equal(t, []string{"lookup_weather"}, got.ToolCalls)
					assert.Equal(t, 2, got.Steps, "two requests: the call, then the answer")
					assert.Contains(t, got.Text, "The weather in Paris:")
					assert.Contains(t, got.Text, "sunny, 21C", "the answer quotes the tool's result")
					usage(t, got, prompt, completion)
				})
				t.Run("multiturn", func(t *testing.T) {
					order++
					o := fmt.Sprintf("ord-%d", order)
					got, _, _ := script(t, "aisdk.mjs", api, mode, "multiturn", o)
					if api == "chat" {
						multiturn(t, got, o, "/chat/completions", "message:assistant")
					} else {
						multiturn(t, got, o, "/responses", "item_reference")
					}
				})
				if api == "responses" {
					for _, sc := range []string{"approve", "decline"} {
						t.Run(sc, func(t *testing.T) {
							order++
							host := fmt.Sprintf("web-%d", order)
							before := tb.Invocations()["isolate_host"]
							got, _, _ := script(t, "aisdk.mjs", api, mode, sc, host)
							approval(t, got, host, sc == "approve", before)
							assert.Len(t, got.Approvals, 1, "one tool-approval-request")
							assert.Empty(t, got.ToolCalls, "no client-side tool call")
							assert.NotEmpty(t, got.ServerCalls)
							for _, c := range got.ServerCalls {
								assert.Equal(t, "mcp.isolate_host", c, "the held call shows as provider-executed tool calls")
							}
						})
					}
				}
				t.Run("onestep", func(t *testing.T) {
					order++
					got, _, _ := script(t, "aisdk.mjs", api, mode, "onestep", fmt.Sprintf("ord-%d", order))
					noError(t, got)
					assert.Equal(t, 1, got.Steps, "the default stopWhen: one step")
					assert.Equal(t, []string{"lookup_weather"}, got.ToolCalls)
					assert.Equal(t, 1, got.Calls, "the SDK ran lookup_weather, and never sent its result")
					// The next turn carries the call and its result, then
					// "thanks": the result answers the held call (the run
					// answers with it), and the message starts the next
					// run at once.
					assert.Zero(t, got.Refused, "the next turn was taken at once: its tool result answered the held call")
					assert.Equal(t, 200, got.FinalStatus)
					assert.Less(t, got.WaitedMs, int64(20000))
					if assert.Len(t, got.Texts, 2) {
						assert.Equal(t, "Done: all settled.", got.Texts[1], "the next turn answered")
					}
					t.Logf("the thread took the next turn after %d ms and %d refusals", got.WaitedMs, got.Refused)
				})
				t.Run("onestep idle", func(t *testing.T) {
					if mode != "generate" {
						t.Skip("the generate mode shows it; streaming adds nothing to a held call's expiry")
					}
					// The loop stops after one step and the user answers
					// later: by then the held call expired, and the thread
					// takes the turn.
					order++
					m.mu.Lock()
					from := len(m.said)
					m.mu.Unlock()
					got, _, _ := script(t, "aisdk.mjs", api, mode, "onestep-idle", fmt.Sprintf("ord-%d", order))
					noError(t, got)
					assert.Equal(t, 1, got.Calls)
					assert.Zero(t, got.Refused, "no thread stuck past the timeout")
					assert.Equal(t, 200, got.FinalStatus)
					assert.True(t, m.toldModel(from, "did not return the result within 3s"), "the held call expired: the model was told it was not performed")
				})
			})
		}
	}

	for _, mode := range []string{"run", "stream"} {
		t.Run("agents "+mode, func(t *testing.T) {
			t.Run("server tool", func(t *testing.T) {
				order++
				o := fmt.Sprintf("ord-%d", order)
				got, prompt, completion := script(t, "agents.mjs", mode, "refund", o)
				noError(t, got)
				assert.Equal(t, "Done: all settled.", got.Text)
				var kinds []string
				for _, it := range got.Items {
					kinds = append(kinds, it.Raw+":"+it.Name)
					assert.NotEqual(t, "function_call", it.Raw, "the agent's refund is no function_call for the SDK to run")
				}
				assert.Contains(t, kinds, "hosted_tool_call:issue_refund", "the refund shows as a hosted (mcp_call) tool call")
				assert.Equal(t, 0, got.Calls)
				assert.Equal(t, 1, refunds(o), "billing refunded %s once", o)
				usage(t, got, prompt, completion)
			})
			t.Run("client tool", func(t *testing.T) {
				order++
				got, prompt, completion := script(t, "agents.mjs", mode, "client", fmt.Sprintf("ord-%d", order))
				noError(t, got)
				assert.Equal(t, 1, got.Calls, "the SDK ran lookup_weather once")
				assert.Contains(t, got.Text, "The weather in Paris:")
				assert.Contains(t, got.Text, "sunny, 21C")
				usage(t, got, prompt, completion)
			})
			t.Run("multiturn", func(t *testing.T) {
				order++
				o := fmt.Sprintf("ord-%d", order)
				got, _, _ := script(t, "agents.mjs", mode, "multiturn", o)
				multiturn(t, got, o, "/responses", "message:assistant")
			})
			for _, sc := range []string{"approve", "decline"} {
				t.Run(sc, func(t *testing.T) {
					order++
					host := fmt.Sprintf("web-%d", order)
					before := tb.Invocations()["isolate_host"]
					got, _, _ := script(t, "agents.mjs", mode, sc, host)
					approval(t, got, host, sc == "approve", before)
					assert.Equal(t, []string{"isolate_host"}, got.Interruptions, "the run stopped for isolate_host's approval")
					assert.Equal(t, 0, got.Calls)
				})
			}
		})
	}

	for _, mode := range []string{"invoke", "stream"} {
		t.Run("langchain "+mode, func(t *testing.T) {
			t.Run("server tool", func(t *testing.T) {
				order++
				o := fmt.Sprintf("ord-%d", order)
				got, prompt, completion := script(t, "langchain.mjs", mode, "refund", o)
				noError(t, got)
				require.Len(t, got.Turns, 1)
				assert.Empty(t, got.Turns[0].ToolCalls, "the AIMessage has no tool_calls: the agent ran the refund")
				assert.Zero(t, got.Turns[0].Invalid)
				assert.Equal(t, []string{"mcp_call:issue_refund"}, got.Turns[0].ToolOutputs, "the refund is among the built-in tool outputs")
				assert.Equal(t, "Done: all settled.", got.Text)
				assert.Equal(t, 1, refunds(o), "billing refunded %s once", o)
				usage(t, got, prompt, completion)
			})
			t.Run("client tool", func(t *testing.T) {
				order++
				got, prompt, completion := script(t, "langchain.mjs", mode, "client", fmt.Sprintf("ord-%d", order))
				noError(t, got)
				require.Len(t, got.Turns, 2, "two invocations: the call, then the answer")
				assert.Equal(t, []string{"lookup_weather"}, got.Turns[0].ToolCalls)
				assert.Equal(t, 1, got.Calls)
				assert.Contains(t, got.Text, "The weather in Paris:")
				assert.Contains(t, got.Text, "sunny, 21C")
				usage(t, got, prompt, completion)
			})
			t.Run("multiturn", func(t *testing.T) {
				order++
				o := fmt.Sprintf("ord-%d", order)
				got, _, _ := script(t, "langchain.mjs", mode, "multiturn", o)
				multiturn(t, got, o, "/responses", "message:assistant")
			})
			for _, sc := range []string{"approve", "decline"} {
				t.Run(sc, func(t *testing.T) {
					order++
					host := fmt.Sprintf("web-%d", order)
					before := tb.Invocations()["isolate_host"]
					got, _, _ := script(t, "langchain.mjs", mode, sc, host)
					approval(t, got, host, sc == "approve", before)
					assert.Equal(t, []string{"isolate_host"}, got.Approvals, "the AIMessage's tool_outputs asked isolate_host's approval")
				})
			}
		})
	}
}
