package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// exportedThread is a thread as 'tulip export' writes it: its state in
// full (conversation, every agent's log, tokens), readable with no server.
type exportedThread struct {
	Thread string                  `json:"thread"`
	State  *threadstate.Checkpoint `json:"state"`
}

// evalCall is one call of a model response.
type evalCall struct {
	Response  int             `json:"response"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	args      *dedup.Args     // Arguments parsed, once (nil: not a JSON object)
}

// evalDifference is the first call where the fork and its origin differ:
// the origin's, the fork's (either absent when one made fewer calls), and
// where their arguments differ (JSON Pointers) when the tool is the same.
type evalDifference struct {
	Origin      *evalCall          `json:"origin,omitempty"`
	Fork        *evalCall          `json:"fork,omitempty"`
	Differences []dedup.Difference `json:"differences,omitempty"`
}

// evalReport is what eval found for one recorded thread.
type evalReport struct {
	Thread string `json:"thread"`
	Fork   string `json:"fork,omitempty"`
	// Verdict is "identical" (every response made the same calls),
	// "diverged" (DivergedAt, the first response that did not) or
	// "failed" (Error).
	Verdict         string          `json:"verdict"`
	DivergedAt      int             `json:"diverged_at,omitempty"`
	FirstDifference *evalDifference `json:"first_difference,omitempty"`
	// NewCalls the fork made that its origin never made; NoLongerMade
	// the origin's calls the fork did not make (by tool and arguments).
	NewCalls     []evalCall `json:"new_calls"`
	NoLongerMade []evalCall `json:"no_longer_made"`
	// Served counts the fork's calls served from the origin's log; Held
	// the new calls it held (never run).
	Served  int               `json:"served_from_origin"`
	Held    int               `json:"held"`
	Answers map[string]string `json:"answers"`
	// Tokens are the origin thread's and the fork's.
	Tokens map[string]*threadstate.Usage `json:"tokens"`
	Error  string                        `json:"error,omitempty"`
}

// evalDecline is the answer eval gives a held call: the fork goes on
// without it.
const evalDecline = "not run: a call the recorded thread never made (tulip eval)"

// eval forks recorded threads from their first response with another
// model (or prompt) and reports, for each, where its calls differ.
func (e *env) eval(args []string) error {
	fs := e.flags("eval")
	c := e.connFlags(fs)
	agentName := fs.String("agent", agentrun.DefaultAgent, "the agent evaluated")
	maxDiverged := fs.Int("max-diverged", 0, "exit 1 when more threads than this diverge (or fail)")
	report := fs.String("report", "", "also write the reports as JSON to this file")
	asJSON := fs.Bool("json", false, "print the reports as JSON instead of text")
	parallel := fs.Int("parallel", 4, "threads evaluated at once")
	db := fs.String("db", "", "the embedded server's state file (threads of 'tulip chat --db FILE')")
	t, instructions := targetFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"usage: tulip eval THREAD... | FILE_OR_DIR... (--task-queue Q --model NAME | [--provider P] --base-url URL --model NAME) [--instructions FILE] [--max-diverged K] [--report FILE] [--json]"}
	}
	if err := t.ready(*instructions); err != nil {
		return err
	}
	origins, err := e.evalInputs(fs.Args())
	if err != nil {
		return err
	}
	s, opts, stop, err := e.forkSession(c, t, true, *db)
	if err != nil {
		return err
	}
	defer stop()
	opts.Agent = *agentName
	e.progress("evaluating %d threads with model %s", len(origins), t.mf.model)
	reports := make([]evalReport, len(origins))
	sem := make(chan struct{}, max(*parallel, 1))
	var wg sync.WaitGroup
	for i, o := range origins {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			reports[i] = e.evalOne(s.client, opts, o)
		}()
	}
	wg.Wait()
	if *report != "" {
		b, _ := json.MarshalIndent(reports, "", "  ")
		if err := os.WriteFile(*report, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			return err
		}
	} else {
		printEval(e.stdout, reports)
	}
	bad := 0
	for _, r := range reports {
		if r.Verdict != "identical" {
			bad++
		}
	}
	if bad > *maxDiverged {
		fmt.Fprintf(e.stderr, "%d of %d threads diverged or failed (allowed: %d)\n", bad, len(reports), *maxDiverged)
		return exitCode(1)
	}
	return nil
}

// evalOrigin is a recorded thread to evaluate: on the server (state nil),
// or read from an exported file.
type evalOrigin struct {
	thread string
	state  *threadstate.Checkpoint
}

// evalInputs reads the arguments: a .json file or a directory of them is
// exported threads; anything else is a thread id on the server.
func (e *env) evalInputs(args []string) ([]evalOrigin, error) {
	var out []evalOrigin
	for _, a := range args {
		fi, err := os.Stat(a)
		switch {
		case err == nil && fi.IsDir():
			files, err := filepath.Glob(filepath.Join(a, "*.json"))
			if err != nil {
				return nil, err
			}
			if len(files) == 0 {
				return nil, usageError{fmt.Sprintf("%s holds no .json files", a)}
			}
			for _, f := range files {
				o, err := readExported(f)
				if err != nil {
					return nil, err
				}
				out = append(out, o)
			}
		case err == nil && strings.HasSuffix(a, ".json"):
			o, err := readExported(a)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		default:
			out = append(out, evalOrigin{thread: a})
		}
	}
	return out, nil
}

// readExported reads a file 'tulip export' wrote (at most 256 MiB).
func readExported(path string) (evalOrigin, error) {
	f, err := os.Open(path)
	if err != nil {
		return evalOrigin{}, err
	}
	defer f.Close()
	var x exportedThread
	dec := json.NewDecoder(io.LimitReader(f, 256<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil {
		return evalOrigin{}, fmt.Errorf("%s is not a thread 'tulip export' wrote: %v", path, err)
	}
	if x.Thread == "" || x.State == nil {
		return evalOrigin{}, fmt.Errorf("%s is not a thread 'tulip export' wrote: no thread or state", path)
	}
	return evalOrigin{thread: x.Thread, state: x.State}, nil
}

// evalOne forks one recorded thread at its first response, plays its
// later user messages as further runs, and compares.
func (e *env) evalOne(cl client.Client, base runclient.RunOptions, o evalOrigin) evalReport {
	rep := evalReport{Thread: o.thread, NewCalls: []evalCall{}, NoLongerMade: []evalCall{}, Answers: map[string]string{},
		Tokens: map[string]*threadstate.Usage{}}
	fail := func(err error) evalReport {
		rep.Verdict, rep.Error = "failed", oneLine(err.Error())
		return rep
	}
	cp := o.state
	if cp == nil {
		var err error
		if cp, err = runclient.Thread(e.ctx, cl, o.thread); err != nil {
			return fail(err)
		}
	}
	f, err := runclient.ForkOf(cp, o.thread, base.Agent, 1, false)
	if err != nil {
		return fail(err)
	}
	opts := base
	opts.ThreadID, opts.Fork = o.thread+"~eval-"+randomID(), f
	rep.Fork = opts.ThreadID
	later := laterRuns(cp.Messages)
	used := map[int]bool{}
	for run := 0; ; run++ {
		if run > 0 {
			next := *f
			next.State, next.Used = nil, slices.Sorted(func(yield func(int) bool) {
				for seq := range used {
					if !yield(seq) {
						return
					}
				}
			})
			opts.Fork, opts.Message = &next, later[run-1]
		}
		if err := e.evalRun(cl, opts, &rep, used); err != nil {
			return fail(err)
		}
		if run >= len(later) {
			break
		}
	}
	forked, err := runclient.Thread(e.ctx, cl, opts.ThreadID)
	if err != nil {
		return fail(err)
	}
	compare(&rep, cp.Messages, forked.Messages)
	rep.Tokens["origin"], rep.Tokens["fork"] = cp.Usage, forked.Usage
	return rep
}

// laterRuns are a conversation's user messages that started a run after
// the first: each follows a final answer (a resume's answer follows the
// held calls' tool messages, and starts none).
func laterRuns(msgs []threadstate.Message) []string {
	var later []string
	for i, m := range msgs {
		if prev := i - 1; m.Role == "user" && prev >= 0 && msgs[prev].Role == "assistant" && len(msgs[prev].ToolCalls) == 0 {
			later = append(later, m.Content)
		}
	}
	return later
}

// evalRun runs one run of a fork to its end, declining every call it
// holds, and counts what it served and held.
func (e *env) evalRun(cl client.Client, opts runclient.RunOptions, rep *evalReport, used map[int]bool) error {
	h, res, err := runclient.Run(e.ctx, cl, opts)
	for i := 0; err == nil && res.Status == agentrun.StatusInterrupted && res.Interrupt != nil; i++ {
		if i == 16 {
			_ = cl.TerminateWorkflow(e.ctx, h.WorkflowID, "", "tulip eval: interrupted 16 times")
			return errors.New("the fork was interrupted 16 times; stopped")
		}
		id := res.Interrupt.ID
		if _, err = runclient.Resume(e.ctx, cl, h.WorkflowID, agentrun.ResumeInput{InterruptID: id, Answer: evalDecline}); err != nil {
			break
		}
		res, err = runclient.Await(e.ctx, cl, h, id)
	}
	if err != nil {
		return err
	}
	if res.Status != agentrun.StatusCompleted {
		return fmt.Errorf("the fork ended %s: %s", res.Status, res.Error)
	}
	lines, err := runclient.Trace(e.ctx, cl, h, res)
	if err != nil {
		return err
	}
	for _, l := range lines {
		switch {
		case l.Relation == dedup.FromOrigin:
			rep.Served++
			if l.ServedFrom != nil {
				used[*l.ServedFrom] = true
			}
		case l.Outcome == agentrun.OutcomeHeld:
			rep.Held++
		}
	}
	return nil
}

// responses are a conversation's model responses: each one's calls, and
// the last one's text.
func responses(msgs []threadstate.Message) (calls [][]evalCall, answer string) {
	for _, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		n := len(calls) + 1
		var cs []evalCall
		for _, tc := range m.ToolCalls {
			c := evalCall{Response: n, Tool: tc.Name, Arguments: json.RawMessage(argsText(tc.Arguments))}
			c.args, _ = dedup.Parse(string(c.Arguments), dedup.Limits{MaxBytes: 1 << 30})
			cs = append(cs, c)
		}
		calls = append(calls, cs)
		answer = m.Content
	}
	return calls, answer
}

// argsText is a call's arguments as JSON (as the model sent them, or a
// JSON string of them when they are not JSON).
func argsText(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// sameCall compares two calls by tool and arguments (the value model).
func sameCall(a, b evalCall) bool {
	if a.Tool != b.Tool {
		return false
	}
	if a.args == nil || b.args == nil {
		return string(a.Arguments) == string(b.Arguments)
	}
	return a.args.ValueEqual(b.args)
}

// compare fills rep from the origin's and the fork's conversations.
func compare(rep *evalReport, origin, fork []threadstate.Message) {
	oc, oa := responses(origin)
	fc, fa := responses(fork)
	rep.Answers["origin"], rep.Answers["fork"] = oa, fa
	rep.Verdict = "identical"
	for i := 0; i < max(len(oc), len(fc)) && rep.DivergedAt == 0; i++ {
		var o, f []evalCall
		if i < len(oc) {
			o = oc[i]
		}
		if i < len(fc) {
			f = fc[i]
		}
		for j := 0; j < max(len(o), len(f)); j++ {
			d := &evalDifference{}
			if j < len(o) {
				d.Origin = &o[j]
			}
			if j < len(f) {
				d.Fork = &f[j]
			}
			if d.Origin != nil && d.Fork != nil && sameCall(*d.Origin, *d.Fork) {
				continue
			}
			if d.Origin != nil && d.Fork != nil && d.Origin.Tool == d.Fork.Tool && d.Origin.args != nil && d.Fork.args != nil {
				d.Differences, _ = dedup.Diff(d.Origin.args, d.Fork.args)
			}
			rep.Verdict, rep.DivergedAt, rep.FirstDifference = "diverged", i+1, d
			break
		}
		if rep.DivergedAt == 0 && (i >= len(oc) || i >= len(fc)) {
			rep.Verdict, rep.DivergedAt = "diverged", i+1 // one answered, the other went on
		}
	}
	// New and dropped calls: the two multisets' differences.
	left := slices.Concat(oc...)
	for _, f := range slices.Concat(fc...) {
		k := slices.IndexFunc(left, func(o evalCall) bool { return sameCall(o, f) })
		if k < 0 {
			rep.NewCalls = append(rep.NewCalls, f)
			continue
		}
		left = slices.Delete(left, k, k+1)
	}
	rep.NoLongerMade = append(rep.NoLongerMade, left...)
}

// printEval prints the reports: a table, then each divergence in words.
func printEval(w io.Writer, reports []evalReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tVERDICT\tSERVED\tNEW\tGONE\tTOKENS ORIGIN → FORK")
	counts := map[string]int{}
	for _, r := range reports {
		counts[r.Verdict]++
		verdict := r.Verdict
		if r.DivergedAt > 0 {
			verdict = fmt.Sprintf("diverged at response %d", r.DivergedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s → %s\n", r.Thread, verdict, r.Served, len(r.NewCalls), len(r.NoLongerMade),
			tokenWords(r.Tokens["origin"]), tokenWords(r.Tokens["fork"]))
	}
	_ = tw.Flush()
	for _, r := range reports {
		switch r.Verdict {
		case "failed":
			fmt.Fprintf(w, "\n%s: failed: %s\n", r.Thread, r.Error)
		case "diverged":
			fmt.Fprintf(w, "\n%s (fork %s): diverged at response %d\n", r.Thread, r.Fork, r.DivergedAt)
			if d := r.FirstDifference; d != nil {
				fmt.Fprintf(w, "  first difference: origin %s, fork %s\n", callWords(d.Origin), callWords(d.Fork))
				for _, df := range d.Differences {
					fmt.Fprintf(w, "    %s: %s → %s\n", df.Path, orNone(df.Was), orNone(df.Now))
				}
			}
			for _, c := range r.NewCalls {
				fmt.Fprintf(w, "  new: %s\n", callWords(&c))
			}
			for _, c := range r.NoLongerMade {
				fmt.Fprintf(w, "  no longer made: %s\n", callWords(&c))
			}
			fmt.Fprintf(w, "  answers: origin %q\n           fork   %q\n", clip(r.Answers["origin"], 120), clip(r.Answers["fork"], 120))
		}
	}
	fmt.Fprintf(w, "\n%d threads: %d identical, %d diverged, %d failed\n", len(reports), counts["identical"], counts["diverged"], counts["failed"])
}

func callWords(c *evalCall) string {
	if c == nil {
		return "(no call)"
	}
	return fmt.Sprintf("%s %s (response %d)", c.Tool, clip(string(c.Arguments), 96), c.Response)
}

func orNone(b json.RawMessage) string {
	if len(b) == 0 {
		return "(absent)"
	}
	return string(b)
}

func tokenWords(u *threadstate.Usage) string {
	if u == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", u.PromptTokens, u.CompletionTokens)
}

// export writes threads in full (conversation, every agent's log,
// tokens) as JSON files, one per thread, that eval reads with no server.
func (e *env) export(args []string) error {
	fs := e.flags("export")
	c := e.connFlags(fs)
	db := dbFlag(fs)
	dir := fs.String("o", "", "the directory written (THREAD.json in it)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 || *dir == "" {
		return usageError{"usage: tulip export THREAD... -o DIR"}
	}
	s, err := e.connect(c, *db != "", *db)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	for _, thread := range fs.Args() {
		cp, err := runclient.Thread(e.ctx, s.client, thread)
		if err != nil {
			return err
		}
		b, err := json.Marshal(exportedThread{Thread: thread, State: cp})
		if err != nil {
			return err
		}
		name := strings.Map(func(r rune) rune {
			if r == '/' || r == '\\' || r == 0 {
				return '_'
			}
			return r
		}, thread)
		path := filepath.Join(*dir, name+".json")
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s: %d messages → %s\n", thread, len(cp.Messages), path)
	}
	return nil
}
