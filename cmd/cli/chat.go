package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/anthropicmodel"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// ChatTaskQueue is the task queue of the worker 'tulip chat' (and 'tulip
// resume --base-url') runs.
const ChatTaskQueue = "tulip-chat"

const chatModel = "openai"

type modelFlags struct {
	provider, baseURL, model, apiKeyEnv, keyHeader string
	// timeout bounds one model call's attempt whole; idle, each wait
	// without progress (headers, a streamed answer's next piece).
	timeout, idle time.Duration
	mcp           *mcpConfig // the MCP servers the worker offers
	// contextTokens is the model's context budget (0: its known window's,
	// or none); window is the model's known window, once made.
	contextTokens, window int
	// deployment and buildID put the worker on a Worker Deployment
	// Version (both, or neither).
	deployment, buildID string
}

// modelHelp is the help of the model flags, as each command words it.
type modelHelp struct{ baseURL, model, apiKeyEnv, keyHeader string }

// newModelFlags adds the model flags (and the MCP servers' flags) to fs,
// in the order --help lists them; chat, serve and resume share them.
func newModelFlags(fs *flagSet, h modelHelp) *modelFlags {
	mf := &modelFlags{}
	fs.StringVar(&mf.baseURL, "base-url", "", h.baseURL)
	fs.StringVar(&mf.model, "model", "", h.model)
	fs.StringVar(&mf.apiKeyEnv, "api-key-env", "OPENAI_API_KEY", h.apiKeyEnv)
	fs.StringVar(&mf.provider, "provider", "openai", `"openai": any OpenAI-compatible endpoint (--base-url); "anthropic": Anthropic's Messages API (key from ANTHROPIC_API_KEY; --base-url optional)`)
	fs.StringVar(&mf.keyHeader, "api-key-header", "", h.keyHeader)
	fs.DurationVar(&mf.timeout, "model-timeout", openaimodel.DefaultTimeout, "the longest one model call's attempt may take, a streamed answer included")
	fs.DurationVar(&mf.idle, "model-idle-timeout", openaimodel.DefaultIdleTimeout, "the longest a model call may go without progress (its headers, then each streamed piece) before it is tried again")
	fs.StringVar(&mf.deployment, "deployment", "", "run the worker on this Worker Deployment (with --build-id): agent runs are pinned to the version they start on, a thread's next run takes the current version (docs/deploy.md)")
	fs.StringVar(&mf.buildID, "build-id", "", "the worker's Build ID in --deployment")
	fs.IntVar(&mf.contextTokens, "context-tokens", 0, "the most input tokens one model call may send; past 80% of it the thread's view is compacted (docs/context.md). 0: the known window of --model, less 8192, or no budget")
	mf.mcp = mcpFlags(fs)
	return mf
}

// missing reports whether the model flags lack what the provider needs.
func (mf *modelFlags) missing() bool {
	switch mf.provider {
	case "anthropic":
		return mf.model == ""
	case "openai", "":
		return mf.baseURL == "" || mf.model == ""
	}
	return false // newModel names the provider it does not know
}

// supportPrompt is the chat agent's system prompt.
const supportPrompt = "You are a support agent. Use the tools to help the customer; do not repeat a tool call you already made unless you must."

// newModel is the model the flags name.
func (mf *modelFlags) newModel() (tulip.Model, error) {
	switch mf.provider {
	case "anthropic":
		keyEnv := mf.apiKeyEnv
		if keyEnv == "OPENAI_API_KEY" { // the flag's default is the OpenAI one
			keyEnv = ""
		}
		m, err := anthropicmodel.New(anthropicmodel.Options{BaseURL: mf.baseURL, Model: mf.model, APIKeyEnv: keyEnv, SystemPrompt: supportPrompt, Timeout: mf.timeout})
		if err != nil {
			return nil, err
		}
		return m, nil
	case "openai", "":
		m, err := openaimodel.New(openaimodel.Options{BaseURL: mf.baseURL, Model: mf.model, APIKeyEnv: mf.apiKeyEnv, KeyHeader: mf.keyHeader,
			SystemPrompt: supportPrompt, Timeout: mf.timeout, IdleTimeout: mf.idle})
		if err != nil {
			return nil, err
		}
		mf.window = m.ContextWindow()
		return m, nil
	}
	return nil, fmt.Errorf("--provider %q: use openai or anthropic", mf.provider)
}

// resumeFlags are the model flags a later 'tulip resume --db' needs.
func (mf *modelFlags) resumeFlags() string {
	s := fmt.Sprintf("--model %s", shellQuote(mf.model))
	if mf.baseURL != "" {
		s = fmt.Sprintf("--base-url %s ", shellQuote(mf.baseURL)) + s
	}
	if mf.provider != "" && mf.provider != "openai" {
		s = fmt.Sprintf("--provider %s ", shellQuote(mf.provider)) + s
	}
	return s
}

// chatWorker starts the support agent's worker: the demo toolbox and hooks,
// and the OpenAI-compatible model.
func (e *env) chatWorker(s *session, mf *modelFlags) (func(), *demo.Toolbox, error) {
	return e.chatWorkerOn(s, mf, ChatTaskQueue)
}

// chatWorkerOn is chatWorker on taskQueue.
func (e *env) chatWorkerOn(s *session, mf *modelFlags, taskQueue string) (func(), *demo.Toolbox, error) {
	if (mf.deployment == "") != (mf.buildID == "") {
		return nil, nil, usageError{"--deployment and --build-id go together: a Worker Deployment Version is both"}
	}
	if mf.deployment != "" {
		s.version = &sdkworker.WorkerDeploymentVersion{DeploymentName: mf.deployment, BuildID: mf.buildID}
	}
	m, err := mf.newModel()
	if err != nil {
		return nil, nil, usageError{err.Error()}
	}
	tb := demo.NewToolbox()
	set, err := e.openMCP(mf.mcp, demo.ToolNames)
	if err != nil {
		return nil, nil, err
	}
	stop, err := s.startWorker(taskQueue, workerplugin.Options{Tools: tb.Tools(), Toolsets: workerplugin.PublicToolsets(toolsets(set)), Hooks: demo.Hooks(),
		Models: workerplugin.PublicModels(map[string]any{chatModel: m}), ModelTimeout: mf.timeout, ContextTokens: mf.budgets()})
	if err != nil {
		_ = set.Close()
		return nil, nil, err
	}
	return func() { stop(); _ = set.Close() }, tb, nil
}

func (e *env) chat(args []string) error {
	fs := e.flags("chat")
	c := e.connFlags(fs)
	mf := newModelFlags(fs, modelHelp{
		baseURL:   "OpenAI-compatible API root, e.g. https://api.openai.com/v1 or http://localhost:11434/v1",
		model:     "model name",
		apiKeyEnv: "environment variable with the API key (read by the worker; with --provider anthropic the default is ANTHROPIC_API_KEY)",
		keyHeader: `header for the key: default "Authorization: Bearer KEY"; "api-key" for Azure OpenAI`,
	})
	thread := fs.String("thread", "", "thread id: reload its checkpoint, and resume it later by this name")
	agentName := fs.String("agent", agentrun.DefaultAgent, "agent name")
	hookList := fs.String("hooks", "", "comma-separated hooks to install (upper_order_id, block_page_oncall, approve_isolate_host)")
	maxTurns := fs.Int("max-turns", 0, "model turn limit (default 32)")
	db := fs.String("db", "", "embedded server state file (so that 'tulip resume --db' can continue an interrupted run)")
	asJSON := fs.Bool("json", false, "print the trace as JSON lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	if mf.missing() || fs.NArg() != 1 {
		return usageError{`usage: tulip chat [--provider openai|anthropic] --base-url URL --model NAME [--thread T] [--agent A] [--hooks H,...] [--mcp NAME=COMMAND ARGS...] [--json] "message"`}
	}
	if _, err := mf.mcp.build(); err != nil {
		return err
	}
	var hooks []string
	for _, h := range strings.Split(*hookList, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if _, ok := demo.Hooks()[h]; !ok {
				return usageError{fmt.Sprintf("unknown hook %q", h)}
			}
			hooks = append(hooks, h)
		}
	}
	s, err := e.connect(c, true, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	stop, tb, err := e.chatWorker(s, mf)
	if err != nil {
		return err
	}
	defer stop()
	// The run streams its decisions and the model's text (Temporal's
	// Workflow Streams): the chat shows them as they happen.
	opts := runclient.RunOptions{TaskQueue: ChatTaskQueue, Model: chatModel, Agent: *agentName, ThreadID: *thread,
		Message: fs.Arg(0), Hooks: hooks, MaxTurns: *maxTurns, Stream: &agentrun.StreamOptions{Text: true, Content: true}}
	if *thread == "" {
		opts.WorkflowID = "tulip-chat-" + randomID()
	}
	e.progress("running agent %s on %s", *agentName, mf.baseURL)
	h, err := runclient.Start(e.ctx, s.client, opts)
	if err != nil {
		return err
	}
	l := e.watch(s.client, h, *asJSON)
	res, err := runclient.Await(e.ctx, s.client, h, "")
	l.stop(s.client, h, res)
	return e.report(s.client, h, res, err, c, *db, mf, *asJSON, tb, l)
}

// report prints what a chat run came to (as runclient.Run or runclient.Await
// returned it), and how to resume it when it is interrupted.
// With l (a chat that printed the run live), only what it did not show is
// printed: a summary, and lines or text it missed.
func (e *env) report(cl client.Client, h runclient.Handle, res *agentrun.RunResult, err error, c *conn, db string, mf *modelFlags, asJSON bool, tb *demo.Toolbox, l *live) error {
	if err != nil && res == nil {
		return err
	}
	// Lines that leave large content out are read back whole.
	if lines, terr := runclient.Trace(e.ctx, cl, h, res); terr == nil {
		res.Trace, res.TraceFrom, res.TraceParts = lines, 0, nil
	} else if err == nil {
		return terr
	}
	e.printRun(res, asJSON, l, tb)
	if asJSON {
		// docs/scenarios.md's summary line, as 'tulip run --json' ends.
		st := scenario.RunStatus{Run: 1, WorkflowID: h.WorkflowID, Status: res.Status}
		if err != nil {
			st.Status, st.Error = agentrun.StatusFailed, err.Error()
		}
		b, _ := json.Marshal(map[string]any{"summary": scenario.Summary{BodyInvocations: tb.Invocations(), Runs: []scenario.RunStatus{st}}})
		fmt.Fprintln(e.stdout, string(b))
	}
	if err != nil {
		return err
	}
	return e.explainInterrupt(h, res, c, db, mf)
}

// printRun prints a run's trace lines, then its answer; after a live
// chat (lv), what the live output did not show, and a summary.
func (e *env) printRun(res *agentrun.RunResult, asJSON bool, lv *live, tb *demo.Toolbox) {
	var lines []scenario.Line
	for _, l := range res.Trace {
		lines = append(lines, scenario.Line{Run: 1, TraceLine: l})
	}
	if asJSON {
		for _, l := range lines {
			if lv != nil && lv.shown(l.TraceLine) {
				continue // the last line of a call id is its final outcome
			}
			b, _ := scenario.MarshalLine(l)
			fmt.Fprintln(e.stdout, string(b))
		}
		return
	}
	if lv == nil {
		if len(lines) > 0 {
			printTable(e.stdout, lines)
		}
		if res.Answer != "" {
			fmt.Fprintf(e.stdout, "\n%s\n", res.Answer)
		}
		return
	}
	for _, l := range lines {
		if !lv.shown(l.TraceLine) {
			lv.print(agentrun.CallItem{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Outcome: l.Outcome, ServedFrom: l.ServedFrom,
				Relation: l.Relation, Arguments: l.Arguments, Result: l.Result, Error: l.Error})
		}
	}
	if res.Answer != "" && !lv.answeredTurn(res.Turns, res.Answer) {
		fmt.Fprintf(e.stdout, "%s\n", res.Answer)
	}
	if len(lines) > 0 {
		fmt.Fprintln(e.stdout)
		printSummary(e.stdout, lines, scenario.Summary{BodyInvocations: tb.Invocations()})
	}
}

func (e *env) explainInterrupt(h runclient.Handle, res *agentrun.RunResult, c *conn, db string, mf *modelFlags) error {
	if res.Status != agentrun.StatusInterrupted || res.Interrupt == nil {
		return nil
	}
	in := res.Interrupt
	fmt.Fprintf(e.stderr, "the run is interrupted (%s, by hook %s): %s\n", in.ID, in.Hook, in.Reason)
	for _, call := range in.Held {
		fmt.Fprintf(e.stderr, "  held: %s %s(%s)\n", call.ID, call.Name, call.Arguments)
	}
	where := "--address " + shellQuote(c.address)
	if c.address == "" {
		where = fmt.Sprintf("--db %s %s", shellQuote(db), mf.resumeFlags())
		if mf.apiKeyEnv != "" && mf.apiKeyEnv != "OPENAI_API_KEY" {
			where += " --api-key-env " + shellQuote(mf.apiKeyEnv)
		}
		if mf.keyHeader != "" {
			where += " --api-key-header " + shellQuote(mf.keyHeader)
		}
		if mf.mcp != nil {
			args, secrets := mf.mcp.resumeArgs()
			where += args
			if secrets {
				where += " (and your --mcp-env / --mcp-header flags, and the --mcp-url secrets shown as ***)"
			}
		}
		if db == "" {
			fmt.Fprintln(e.stderr, "this embedded server keeps nothing: run chat with --db FILE to resume in a later process")
			return nil
		}
	}
	if c.namespace != "" {
		where += " --namespace " + shellQuote(c.namespace)
	}
	fmt.Fprintf(e.stderr, "resume it with:\n  tulip resume %s --interrupt %s --answer approved --perform-dangling %s\n", shellQuote(h.WorkflowID), shellQuote(in.ID), where)
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// budgets are the worker's context budgets: --context-tokens, else the
// model's known window less 8192 tokens for the answer (as
// tulip.Options.ContextTokens defaults), else none.
func (mf *modelFlags) budgets() map[string]int {
	switch {
	case mf.contextTokens > 0:
		return map[string]int{chatModel: mf.contextTokens}
	case mf.window > 0:
		return map[string]int{chatModel: max(mf.window-8192, mf.window/2)}
	}
	return nil
}
