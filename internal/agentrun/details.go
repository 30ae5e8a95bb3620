package agentrun

import (
	"strconv"
	"strings"

	"github.com/tulip-temporal/tulip/internal/threadstate"

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
	// Written piece by piece (no fmt): the details are set after every
	// response's calls, on every replay too.
	var sb strings.Builder
	sb.Grow(256 + 160*min(len(r.trace), detailsRows))
	sb.WriteString("**tulip** · agent `")
	sb.WriteString(r.in.Agent)
	sb.WriteString("`")
	if r.in.ThreadID != "" {
		sb.WriteString(" · thread `")
		sb.WriteString(r.in.ThreadID)
		sb.WriteString("`")
	}
	if f := r.forkOf; f != nil {
		sb.WriteString(" · fork of `")
		sb.WriteString(f.Thread)
		sb.WriteString("` at response ")
		sb.WriteString(strconv.Itoa(f.At))
	}
	sb.WriteString(" · turn ")
	sb.WriteString(strconv.Itoa(r.turn))
	sb.WriteString(" · ")
	sb.WriteString(r.status)
	sb.WriteString("\n\n")
	sb.WriteString(strconv.Itoa(len(r.trace)))
	sb.WriteString(" calls in this run: ")
	sb.WriteString(strconv.Itoa(executed))
	sb.WriteString(" ran, **")
	sb.WriteString(strconv.Itoa(served))
	sb.WriteString(" served from the log** (no event, body not run); near misses: ")
	sb.WriteString(strconv.Itoa(near))
	sb.WriteString(".\n\n")
	if u := r.usage; u != nil {
		sb.WriteString("Tokens, this run: ")
		writeUsage(&sb, u)
		if r.in.ThreadID != "" && r.countsThread {
			sb.WriteString("; the thread: ")
			writeUsage(&sb, r.threadBase.Plus(u))
		}
		sb.WriteString(".\n\n")
	}
	if v := r.mview; v.Upto > 0 {
		// Compaction (compact.go): what the model is sent, and its cost.
		sb.WriteString("The model's view: a summary in place of messages 1-")
		sb.WriteString(strconv.Itoa(v.Upto))
		sb.WriteString(" of ")
		sb.WriteString(strconv.Itoa(r.convLen()))
		sb.WriteString(" (compacted ")
		sb.WriteString(strconv.Itoa(v.Compactions))
		sb.WriteString(" times on the thread; it keeps every message)")
		var cost *threadstate.Usage
		for _, c := range r.compacted {
			cost = cost.Add(c.Usage)
		}
		if cost != nil {
			sb.WriteString("; this run's summaries: ")
			writeUsage(&sb, cost)
		}
		sb.WriteString(".\n\n")
	}
	if len(r.trace) == 0 {
		return sb.String()
	}
	from := 0
	if len(r.trace) > detailsRows {
		from = len(r.trace) - detailsRows
		sb.WriteString("The latest " + strconv.Itoa(detailsRows) + ":\n\n")
	}
	sb.WriteString("| turn | call | tool | outcome | why |\n| --- | --- | --- | --- | --- |\n")
	for i := range r.trace[from:] {
		l := &r.trace[from+i]
		outcome, why := string(l.Outcome), ""
		switch {
		case l.Outcome == OutcomeCached && l.ServedFrom != nil:
			outcome = "**served**"
			why = "from record " + strconv.Itoa(*l.ServedFrom) + " (" + string(l.Relation) + ")"
		case l.Unknown != nil:
			outcome = "ran · **outcome unknown: " + l.Unknown.Resolution + "**"
			why = l.Unknown.Cause
		case l.NearMiss != nil:
			outcome = "ran · **near miss**"
			why = l.NearMiss.String()
		case l.Error != nil && l.Outcome != OutcomeExecuted:
			why = *l.Error
		}
		sb.WriteString("| ")
		sb.WriteString(strconv.Itoa(l.Turn))
		sb.WriteString(" | ")
		sb.WriteString(cell(l.CallID, 40))
		sb.WriteString(" | ")
		sb.WriteString(cell(l.Tool, 40))
		sb.WriteString(" | ")
		sb.WriteString(outcome)
		sb.WriteString(" | ")
		sb.WriteString(cell(why, 120))
		sb.WriteString(" |\n")
	}
	return sb.String()
}

// writeUsage writes u's counts: "1900 prompt (190 cached), 19 completion".
func writeUsage(sb *strings.Builder, u *threadstate.Usage) {
	sb.WriteString(strconv.Itoa(u.PromptTokens))
	sb.WriteString(" prompt (")
	sb.WriteString(strconv.Itoa(u.CachedTokens))
	sb.WriteString(" cached), ")
	sb.WriteString(strconv.Itoa(u.CompletionTokens))
	sb.WriteString(" completion")
}

// cell makes s safe for one markdown table cell, at most n bytes.
var cellReplacer = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "`", "'")

func cell(s string, n int) string {
	if strings.ContainsAny(s, "|\n\r`") {
		s = cellReplacer.Replace(s)
	}
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
