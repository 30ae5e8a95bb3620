package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

func (e *env) run(args []string) error {
	fs := e.flags("run")
	c := e.connFlags(fs)
	file := fs.String("scenario", "", "scenario file (docs/scenarios.md), or a conformance case")
	asJSON := fs.Bool("json", false, "print the trace as JSON lines (docs/scenarios.md)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() > 0 {
		return usageError{"usage: tulip run --scenario FILE [--json]"}
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return fmt.Errorf("cannot read scenario: %v", err)
	}
	hooks := demo.Hooks()
	sc, err := scenario.Parse(data, func(h string) bool { _, ok := hooks[h]; return ok })
	if err != nil {
		return fmt.Errorf("%s: %v", *file, err)
	}
	return e.play(c, sc, *asJSON, nil)
}

// play runs sc on a fresh task queue with the demo toolbox, printing the
// trace as JSON lines or a table, then the summary.
func (e *env) play(c *conn, sc *scenario.Scenario, asJSON bool, tb *demo.Toolbox) error {
	s, err := e.connect(c, true, "")
	if err != nil {
		return err
	}
	defer s.Close()
	prefix := "tulip-" + randomID()
	if tb == nil {
		tb = demo.NewToolbox()
	}
	stop, err := s.startWorker(prefix, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: sc.Models(prefix)})
	if err != nil {
		return err
	}
	defer stop()
	var lines []scenario.Line
	r := &scenario.Runner{Client: s.client, TaskQueue: prefix, Prefix: prefix, Progress: e.stderr,
		OnLine: func(l scenario.Line) {
			if asJSON {
				b, _ := scenario.MarshalLine(l)
				fmt.Fprintln(e.stdout, string(b))
			}
			lines = append(lines, l)
		}}
	runs, err := r.Run(e.ctx, sc)
	if err != nil {
		return err
	}
	sum := scenario.Summary{BodyInvocations: tb.Invocations(), Runs: runs}
	if asJSON {
		b, _ := json.Marshal(map[string]any{"summary": sum})
		fmt.Fprintln(e.stdout, string(b))
	} else {
		printTable(e.stdout, lines)
		fmt.Fprintln(e.stdout)
		printSummary(e.stdout, lines, sum)
	}
	for _, r := range runs {
		if r.Status == agentrun.StatusFailed {
			e.progress("run %d failed: %s", r.Run, r.Error)
			return exitCode(1)
		}
	}
	return nil
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

// servedFrom is how tables say that a call was served from the log: the
// same word, "cached", for trace lines (docs/scenarios.md's outcome) and
// for log records (their origin).
func servedFrom(seq int, rel dedup.Relation) string {
	if rel == dedup.FromOrigin {
		return fmt.Sprintf("cached (origin, record %d)", seq)
	}
	return fmt.Sprintf("cached (record %d, %s)", seq, strings.ReplaceAll(string(rel), "_", " "))
}

// nearMissWords is " (nearest: record 0, /amount 120.0 → 120.5)" for a
// call that ran although its tool had records, "" otherwise.
func nearMissWords(nm *dedup.NearMiss) string {
	if nm == nil {
		return ""
	}
	return " (" + clip(nm.String(), 96) + ")"
}

// unknownWords is " (outcome unknown: applied, 1 check)" for a call
// whose attempt's outcome was unknown, "" otherwise.
func unknownWords(u *agentrun.Unknown) string {
	if u == nil {
		return ""
	}
	var asked []string
	if u.Checks > 0 {
		asked = append(asked, plural(u.Checks, "check"))
	}
	if u.Holds > 0 {
		asked = append(asked, plural(u.Holds, "hold"))
	}
	if u.Retries > 0 {
		asked = append(asked, plural(u.Retries, "retry"))
	}
	return " (outcome unknown: " + strings.Join(append([]string{u.Resolution}, asked...), ", ") + ")"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func printTable(w io.Writer, lines []scenario.Line) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTURN\tCALL\tTOOL\tARGUMENTS\tOUTCOME\tRESULT / ERROR")
	for _, l := range lines {
		detail := string(l.Result)
		if l.Error != nil {
			detail = "error: " + *l.Error
		}
		outcome := string(l.Outcome)
		if l.ServedFrom != nil {
			outcome = servedFrom(*l.ServedFrom, l.Relation)
		}
		outcome += nearMissWords(l.NearMiss) + unknownWords(l.Unknown)
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", l.Run, l.Turn, l.CallID, l.Tool, clip(string(l.Arguments), 48), outcome, clip(detail, 60))
	}
	tw.Flush()
}

func printSummary(w io.Writer, lines []scenario.Line, sum scenario.Summary) {
	asked := map[string]int{}
	for _, l := range lines {
		if l.Outcome != agentrun.OutcomeHeld && l.Outcome != agentrun.OutcomeRejected {
			asked[l.Tool]++
		}
	}
	var tools []string
	for t, n := range sum.BodyInvocations {
		if n > 0 || asked[t] > 0 {
			tools = append(tools, t)
		}
	}
	sort.Strings(tools)
	fmt.Fprintln(w, "Tool bodies that really ran:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range tools {
		fmt.Fprintf(tw, "  %s\t%d of %d calls\n", t, sum.BodyInvocations[t], asked[t])
	}
	tw.Flush()
	for _, r := range sum.Runs {
		fmt.Fprintf(w, "Run %d (%s): %s\n", r.Run, r.WorkflowID, r.Status)
	}
}

func (e *env) demo(args []string) error {
	fs := e.flags("demo")
	c := e.connFlags(fs)
	asJSON := fs.Bool("json", false, "print the trace as JSON lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"usage: tulip demo [--address A] [--json]"}
	}
	if _, err := e.keys(c.codecKeyFile); err != nil {
		return err // before anything starts
	}
	bill, err := billing.Start()
	if err != nil {
		return err
	}
	defer bill.Close()
	e.progress("billing service at %s", bill.URL())
	tb := demo.NewToolbox()
	tb.UseBilling(billing.Client{BaseURL: bill.URL()})
	if !*asJSON {
		fmt.Fprintln(e.stdout, "The refund story: the model refunds ord-4821, then retries \"to be sure\", pages on-call twice and mints two case ids;")
		fmt.Fprintln(e.stdout, "a second run on the same thread asks for the refund again. issue_refund calls a billing service over HTTP.")
		fmt.Fprintln(e.stdout)
	}
	if err := e.play(c, demo.RefundStory(), *asJSON, tb); err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "Refunds billing actually made: %d\n", len(bill.Refunds()))
	}
	return nil
}
