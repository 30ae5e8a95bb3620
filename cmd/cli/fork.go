package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
)

// forkTarget is where a fork's runs go: the workers of a task queue
// (--task-queue, a model they register), or this process's own chat
// worker (the model flags).
type forkTarget struct {
	taskQueue    string
	instructions string // --instructions FILE, read
	mf           *modelFlags
}

// targetFlags adds the flags that choose a fork's worker and model.
func targetFlags(fs *flagSet) (*forkTarget, *string) {
	t := &forkTarget{}
	t.mf = newModelFlags(fs, modelHelp{
		baseURL:   "run the forks on this process's worker, with this OpenAI-compatible model API root",
		model:     "the model: with --task-queue, a model its workers register; else the name sent to --base-url",
		apiKeyEnv: "environment variable with the API key (this process's worker)",
		keyHeader: `header for the key: default "Authorization: Bearer KEY"`,
	})
	fs.StringVar(&t.taskQueue, "task-queue", "", "run the forks on the workers of this task queue (their tools and models) instead of this process's own")
	instructions := fs.String("instructions", "", "a file whose text is given to the model as the forks' instructions (after its system prompt)")
	return t, instructions
}

// ready checks the flags and reads the instructions file.
func (t *forkTarget) ready(instructions string) error {
	if t.taskQueue == "" && t.mf.missing() || t.taskQueue != "" && t.mf.model == "" {
		return usageError{"give --task-queue Q --model NAME (workers you run), or --base-url URL --model NAME (this process runs the worker)"}
	}
	if t.taskQueue != "" && (t.mf.baseURL != "" || !t.mf.mcp.empty()) {
		return usageError{"--task-queue runs the forks on your workers: --base-url and --mcp are for this process's worker"}
	}
	if instructions != "" {
		b, err := os.ReadFile(instructions)
		if err != nil {
			return err
		}
		if len(b) > 256<<10 {
			return usageError{fmt.Sprintf("--instructions %s is over 256 KiB", instructions)}
		}
		t.instructions = string(b)
	}
	_, err := t.mf.mcp.build()
	return err
}

// forkSession connects (an embedded server when allowed and none is
// named) and starts the worker forks need: the session, the run options
// every fork run shares, and a stop that ends both.
func (e *env) forkSession(c *conn, t *forkTarget, embedded bool, db string) (*session, runclient.RunOptions, func(), error) {
	s, err := e.connect(c, embedded, db)
	if err != nil {
		return nil, runclient.RunOptions{}, nil, err
	}
	opts, stop, err := e.forkWorker(s, t)
	if err != nil {
		s.Close()
		return nil, opts, nil, err
	}
	return s, opts, func() { stop(); s.Close() }, nil
}

// forkWorker starts the worker a fork needs (none with --task-queue) and
// returns the run options every fork run shares, and a stop.
func (e *env) forkWorker(s *session, t *forkTarget) (runclient.RunOptions, func(), error) {
	opts := runclient.RunOptions{TaskQueue: t.taskQueue, Model: t.mf.model, Instructions: t.instructions}
	if t.taskQueue != "" {
		return opts, func() {}, nil
	}
	stop, _, err := e.chatWorker(s, t.mf)
	if err != nil {
		return opts, nil, err
	}
	opts.TaskQueue, opts.Model = ChatTaskQueue, chatModel
	return opts, stop, nil
}

// fork starts a new thread from another's state before one of its model
// responses, and runs it: what the origin did is served from its log.
func (e *env) fork(args []string) error {
	fs := e.flags("fork")
	c := e.connFlags(fs)
	at := fs.Int("at", 1, "the model response (1 is the first) the fork replaces: it starts from the conversation and log before it")
	to := fs.String("to", "", `the fork's thread id (default THREAD~fork-RANDOM)`)
	agentName := fs.String("agent", agentrun.DefaultAgent, "the agent forked")
	live := fs.Bool("live", false, "run the calls the origin never made (default: hold them, as an interrupt)")
	message := fs.String("message", "", "a user message added after the fork's point")
	asJSON := fs.Bool("json", false, "print the trace as JSON lines and the run's status")
	db := fs.String("db", "", "the embedded server's state file (a 'tulip chat --db FILE' thread)")
	t, instructions := targetFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: tulip fork THREAD --at N [--to NEW] [--live] [--instructions FILE] [--message M] (--task-queue Q --model NAME | [--provider P] --base-url URL --model NAME) [--json]"}
	}
	if err := t.ready(*instructions); err != nil {
		return err
	}
	origin := fs.Arg(0)
	s, opts, stop, err := e.forkSession(c, t, *db != "", *db)
	if err != nil {
		return err
	}
	defer stop()
	f, err := runclient.Fork(e.ctx, s.client, origin, *agentName, *at, *live)
	if err != nil {
		return err
	}
	opts.ThreadID, opts.Agent, opts.Fork, opts.Message = *to, *agentName, f, *message
	if opts.ThreadID == "" {
		opts.ThreadID = origin + "~fork-" + randomID()
	}
	e.progress("forking thread %s at response %d onto thread %s", origin, *at, opts.ThreadID)
	h, res, err := runclient.Run(e.ctx, s.client, opts)
	if err != nil && res == nil {
		return err
	}
	if lines, terr := runclient.Trace(e.ctx, s.client, h, res); terr == nil {
		res.Trace = lines
	}
	if *asJSON {
		for _, l := range res.Trace {
			b, _ := scenario.MarshalLine(scenario.Line{Run: 1, TraceLine: l})
			fmt.Fprintln(e.stdout, string(b))
		}
		b, _ := json.Marshal(map[string]any{"fork": map[string]any{"thread": opts.ThreadID, "origin": origin, "at": *at, "status": res.Status,
			"interrupt": res.Interrupt, "answer": res.Answer, "usage": res.Usage}})
		fmt.Fprintln(e.stdout, string(b))
	} else {
		e.printRun(res, false, nil, nil)
		served, held, ran := 0, 0, 0
		for _, l := range res.Trace {
			switch {
			case l.Relation == "origin":
				served++
			case l.Outcome == agentrun.OutcomeHeld:
				held++
			case l.Outcome == agentrun.OutcomeExecuted || l.Outcome == agentrun.OutcomeDangling:
				ran++
			}
		}
		fmt.Fprintf(e.stdout, "\nfork %s of %s at response %d: %s; %d calls served from the origin, %d new held, %d ran\n",
			opts.ThreadID, origin, *at, res.Status, served, held, ran)
	}
	if err != nil {
		return err
	}
	return e.explainInterrupt(h, res, c, *db, t.mf)
}
