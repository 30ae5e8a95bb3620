package agentrun

import (
	"fmt"
	"strings"

	wf "go.temporal.io/sdk/workflow"
)

// detailsRows bounds the calls the run's current details list: the latest.
const detailsRows = 20

// showDetails sets the run's current details (workflow.SetCurrentDetails:
// user metadata the Web UI shows, no event of its own) to a short markdown
// table of its latest calls, served calls and near misses marked. A served
// call has no event in the history; this is where the UI shows it. The
// details pass through the client's data converter (and codec) like any
// payload.
func (r *run) showDetails(ctx wf.Context) {
	if !r.stateByRef {
		return
	}
	wf.SetCurrentDetails(ctx, r.details())
}

func (r *run) details() string {
	var executed, served, near int
	for _, l := range r.trace {
		switch l.Outcome {
		case OutcomeExecuted, OutcomeDangling:
			executed++
		case OutcomeCached:
			served++
		}
		if l.NearMiss != nil {
			near++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "**tulip** · agent `%s`", r.in.Agent)
	if r.in.ThreadID != "" {
		fmt.Fprintf(&sb, " · thread `%s`", r.in.ThreadID)
	}
	fmt.Fprintf(&sb, " · turn %d · %s\n\n", r.turn, r.status)
	fmt.Fprintf(&sb, "%d calls in this run: %d ran, **%d served from the log** (no event, body not run); near misses: %d.\n\n",
		len(r.trace), executed, served, near)
	if len(r.trace) == 0 {
		return sb.String()
	}
	from := 0
	if len(r.trace) > detailsRows {
		from = len(r.trace) - detailsRows
		fmt.Fprintf(&sb, "The latest %d:\n\n", detailsRows)
	}
	sb.WriteString("| turn | call | tool | outcome | why |\n| --- | --- | --- | --- | --- |\n")
	for _, l := range r.trace[from:] {
		outcome, why := string(l.Outcome), ""
		switch {
		case l.Outcome == OutcomeCached && l.ServedFrom != nil:
			outcome = "**served**"
			why = fmt.Sprintf("from record %d (%s)", *l.ServedFrom, l.Relation)
		case l.NearMiss != nil:
			outcome = "ran · **near miss**"
			why = l.NearMiss.String()
		case l.Error != nil && l.Outcome != OutcomeExecuted:
			why = *l.Error
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s |\n", l.Turn, cell(l.CallID, 40), cell(l.Tool, 40), outcome, cell(why, 120))
	}
	return sb.String()
}

// cell makes s safe for one markdown table cell, at most n bytes.
var cellReplacer = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "`", "'")

func cell(s string, n int) string {
	s = cellReplacer.Replace(s)
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
