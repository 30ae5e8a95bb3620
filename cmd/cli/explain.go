package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// explanation is what 'tulip explain --json' prints.
type explanation struct {
	Thread string       `json:"thread"`
	Agent  string       `json:"agent"`
	Call   dedup.Record `json:"call"`
	// Candidates are the agent's earlier records of the tool, nearest
	// first.
	Candidates []dedup.Candidate `json:"candidates"`
	// OtherAgents are records of the same tool with equal arguments in
	// other agents' logs on the thread: agents never see each other's.
	OtherAgents []otherRecord `json:"other_agents"`
	// Fork, on a forked thread, is where it came from; OriginRecords, for
	// a call served from the origin, are the origin's records equal to it
	// from the fork's point on (the first unused one served it).
	Fork          *threadstate.ForkOf `json:"fork,omitempty"`
	OriginRecords []int               `json:"origin_records,omitempty"`
}

type otherRecord struct {
	Agent  string `json:"agent"`
	Record int    `json:"record"`
	CallID string `json:"call_id"`
}

// explain answers "why did it run again?" for one call of a thread: the
// call's record, its near miss, every earlier record of its tool ranked
// nearest first, and equal records in other agents' logs.
func (e *env) explain(args []string) error {
	fs := e.flags("explain")
	c := e.connFlags(fs)
	db := dbFlag(fs)
	agentName := fs.String("agent", agentrun.DefaultAgent, "the agent whose log holds the call")
	seq := fs.Int("record", -1, "the record to explain, when the call id is on several")
	asJSON := fs.Bool("json", false, "print the explanation as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError{"usage: tulip explain THREAD CALL_ID [--agent A] [--record N] [--json]"}
	}
	thread, callID := fs.Arg(0), fs.Arg(1)
	s, err := e.connect(c, *db != "", *db)
	if err != nil {
		return err
	}
	defer s.Close()
	cp, err := runclient.Thread(e.ctx, s.client, thread)
	if err != nil {
		return err
	}
	if cp == nil || cp.Agents[*agentName] == nil {
		return fmt.Errorf("thread %s has no log of agent %s (agents: %v)", thread, *agentName, agentsOf(cp))
	}
	l, err := dedup.Restore(cp.Agents[*agentName])
	if err != nil {
		return err
	}
	var on []int
	for i := 0; i < l.Len(); i++ {
		if l.At(i).CallID == callID {
			on = append(on, i)
		}
	}
	switch {
	case len(on) == 0:
		return fmt.Errorf("no record of call %s in agent %s's log on thread %s (rejected, held and dangling calls are not recorded)", callID, *agentName, thread)
	case *seq >= 0 && !contains(on, *seq):
		return fmt.Errorf("record %d is not call %s (it is on records %v)", *seq, callID, on)
	case *seq < 0:
		*seq = on[len(on)-1]
	}
	rec := l.At(*seq)
	ex := explanation{Thread: thread, Agent: *agentName, Call: *rec, Candidates: []dedup.Candidate{}, OtherAgents: []otherRecord{}}
	if rec.Args() != nil {
		ex.Candidates = l.Rank(rec.Tool, rec.Args(), rec.Seq)
		for _, name := range agentsOf(cp) {
			if name == *agentName {
				continue
			}
			other, err := dedup.Restore(cp.Agents[name])
			if err != nil {
				return err
			}
			for _, c := range other.Rank(rec.Tool, rec.Args(), other.Len()) {
				if c.Distance == 0 {
					ex.OtherAgents = append(ex.OtherAgents, otherRecord{Agent: name, Record: c.Record, CallID: c.CallID})
				}
			}
		}
	}
	ex.Fork = cp.Fork
	if rec.Relation == dedup.FromOrigin && cp.Fork != nil && rec.Args() != nil {
		if ex.OriginRecords, err = originRecords(e, s, cp.Fork, *agentName, rec); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ex)
	}
	w := e.stdout
	if f := ex.Fork; f != nil {
		fmt.Fprintf(w, "thread %s is a fork of thread %s at response %d\n", thread, f.Thread, f.At)
	}
	fmt.Fprintf(w, "call %s on thread %s, agent %s: record %d, %s %s\n", callID, thread, *agentName, rec.Seq, rec.Tool, clip(rec.Arguments, 80))
	if len(on) > 1 {
		fmt.Fprintf(w, "(call id %s is on records %v; --record N picks another)\n", callID, on)
	}
	switch {
	case rec.Relation == dedup.FromOrigin && ex.Fork != nil:
		fmt.Fprintf(w, "it did not run: served from the log of thread %s (records equal to it from response %d on: %v)\n", ex.Fork.Thread, ex.Fork.At, ex.OriginRecords)
	case rec.ServedFrom != nil:
		fmt.Fprintf(w, "it did not run: %s\n", servedFrom(*rec.ServedFrom, rec.Relation))
	case rec.Origin == dedup.Cancelled:
		fmt.Fprintf(w, "it did not run: a hook cancelled it\n")
	case rec.NearMiss != nil:
		fmt.Fprintf(w, "it ran: %s\nwhy: %s\n", rec.NearMiss, reasonWords[rec.NearMiss.Reason])
	case len(ex.Candidates) == 0:
		fmt.Fprintf(w, "it ran: no earlier record of %s in this log\n", rec.Tool)
	default:
		fmt.Fprintf(w, "it ran\n")
	}
	if len(ex.Candidates) > 0 {
		fmt.Fprintf(w, "\nrecords of %s before it, nearest first:\n", rec.Tool)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RANK\tRECORD\tCALL\tRESPONSE\tORIGIN\tDIFFERING\tWHERE")
		for i, c := range ex.Candidates {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%d\t%s\n", i+1, c.Record, c.CallID, c.Response, c.Origin, c.Distance, clip(c.DifferencesText(), 96))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, o := range ex.OtherAgents {
		fmt.Fprintf(w, "\nagent %s has an equal record (%d, call %s): agents never see each other's logs\n", o.Agent, o.Record, o.CallID)
	}
	return nil
}

// reasonWords say each near-miss reason as a person would.
var reasonWords = map[dedup.NearMissReason]string{
	dedup.ReasonArguments:     "its arguments differ from every earlier record of the tool (the nearest first below)",
	dedup.ReasonNotIdempotent: "the tool is not declared idempotent (ToolSpec.Idempotent), so it runs every time",
	dedup.ReasonAfterResume:   "the run was resumed after an interrupt, and a resumed run matches nothing",
	dedup.ReasonSameResponse:  "within one response calls match by sorted-key JSON, where 120 and 120.0 differ",
	dedup.ReasonHook:          "a hook rewrote the call, and records hold the rewritten arguments",
}

// agentsOf lists the agents with a log on a thread, sorted.
func agentsOf(cp *threadstate.Checkpoint) []string {
	names := []string{}
	if cp != nil {
		for name := range cp.Agents {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// originRecords are the records of a fork's origin equal to rec (its tool,
// its arguments by the value model) from the fork's point on.
func originRecords(e *env, s *session, f *threadstate.ForkOf, agent string, rec *dedup.Record) ([]int, error) {
	cp, err := runclient.Thread(e.ctx, s.client, f.Thread)
	if err != nil {
		return nil, fmt.Errorf("the fork's origin, thread %s: %w", f.Thread, err)
	}
	recs, err := runclient.LogOf(cp, agent)
	if err != nil {
		return nil, fmt.Errorf("the fork's origin, thread %s: %w", f.Thread, err)
	}
	// Past the log: the calls a resume performed (approved), which a fork
	// serves as it serves the log's records.
	recs = append(recs, runclient.PerformedRecords(cp, agent, len(recs))...)
	var out []int
	for i := range recs {
		if o := &recs[i]; o.Response >= f.At && o.Origin != dedup.Cancelled && o.SameCall(rec.Tool, rec.Args()) {
			out = append(out, o.Seq)
		}
	}
	return out, nil
}
