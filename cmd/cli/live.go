package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// live prints a run as it goes, from its stream (Temporal's Workflow
// Streams): each call's line as it is decided, the model's text as it is
// generated. With asJSON, the calls' trace lines as JSON (no text).
type live struct {
	e      *env
	asJSON bool
	cancel context.CancelFunc
	done   chan error

	mu       sync.Mutex
	next     int64             // the next offset not yet read
	lines    map[string]string // each call's last outcome printed
	cut      map[string]bool   // calls whose live line left content out
	answered map[int]bool      // turns whose whole text was printed
	pieces   map[[2]int]int    // pieces printed by turn and attempt
	said     map[int]string    // the text printed for each turn (its latest attempt)
	at       [2]int            // the turn and attempt being printed
	mid      bool              // a text line is open
}

// watch subscribes to the run h and prints what comes, until stop.
func (e *env) watch(c client.Client, h runclient.Handle, asJSON bool) *live {
	ctx, cancel := context.WithCancel(e.ctx)
	l := &live{e: e, asJSON: asJSON, cancel: cancel, done: make(chan error, 1), lines: map[string]string{},
		cut: map[string]bool{}, answered: map[int]bool{}, pieces: map[[2]int]int{}, said: map[int]string{}}
	go func() {
		l.done <- streams.Subscribe(ctx, c, h.WorkflowID, streams.SubscribeOptions{RunID: h.RunID}, l.item)
	}()
	return l
}

func (l *live) item(it streams.Item) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = it.Offset + 1
	switch it.Topic {
	case protocol.TopicCalls:
		var ci agentrun.CallItem
		if err := it.Decode(&ci); err != nil {
			return nil // an item this build cannot read is skipped
		}
		l.call(ci)
	case protocol.TopicText:
		var ti protocol.TextItem
		if err := it.Decode(&ti); err == nil && !l.asJSON {
			l.text(ti)
		}
	case protocol.TopicContext:
		var c agentrun.Compaction
		if err := it.Decode(&c); err == nil && !l.asJSON {
			fmt.Fprintf(l.e.stdout, "[compacted before turn %d: a summary now stands for messages 1-%d (%d new), the call at ~%d of %d tokens]\n",
				c.Turn, c.Upto, c.Replaced, c.Estimate, c.Budget)
		}
	}
	return nil
}

// print prints a call's line (one the stream did not bring).
func (l *live) print(ci agentrun.CallItem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.call(ci)
}

func (l *live) call(ci agentrun.CallItem) {
	line := agentrun.TraceLine{Turn: ci.Turn, CallID: ci.CallID, Tool: ci.Tool, Arguments: ci.Arguments, Outcome: ci.Outcome,
		Result: ci.Result, Error: ci.Error, ServedFrom: ci.ServedFrom, Relation: ci.Relation}
	if ci.CutBytes > 0 {
		l.cut[ci.CallID] = true
	}
	l.lines[ci.CallID] = string(ci.Outcome)
	w := l.e.stdout
	if l.asJSON {
		b, _ := scenario.MarshalLine(scenario.Line{Run: 1, TraceLine: line})
		fmt.Fprintln(w, string(b))
		return
	}
	l.endText()
	outcome := string(ci.Outcome)
	if ci.ServedFrom != nil {
		outcome = servedFrom(*ci.ServedFrom, ci.Relation)
	}
	if nm := ci.NearMiss; nm != nil {
		outcome += fmt.Sprintf(" (nearest: record %d, %s)", nm.Record, nm.Reason)
	}
	detail := string(ci.Result)
	if ci.Error != nil {
		detail = "error: " + *ci.Error
	}
	fmt.Fprintf(w, "  [turn %d] %s %s → %s  %s\n", ci.Turn, ci.Tool, clip(string(ci.Arguments), 60), outcome, clip(detail, 60))
}

func (l *live) text(ti protocol.TextItem) {
	w := l.e.stdout
	key := [2]int{ti.Turn, ti.Attempt}
	if l.answered[ti.Turn] {
		return // a late piece of a turn already printed whole
	}
	if ti.Done {
		if ti.Delta != "" { // not streamed (or not all pieces sent): the whole text
			l.endText()
			fmt.Fprint(w, ti.Delta)
			l.said[ti.Turn] = ti.Delta
			l.mid = true
		}
		l.answered[ti.Turn] = true
		l.endText()
		return
	}
	if l.mid && l.at != key {
		l.endText()
		if l.at[0] == ti.Turn {
			fmt.Fprintln(w, "(the model was asked again)")
		}
	}
	if l.at != key {
		l.said[ti.Turn] = ""
	}
	l.at, l.mid = key, true
	l.pieces[key]++
	l.said[ti.Turn] += ti.Delta
	fmt.Fprint(w, ti.Delta)
}

func (l *live) endText() {
	if l.mid {
		fmt.Fprintln(l.e.stdout)
		l.mid = false
	}
}

// stop ends the subscription once it has read what the run published so
// far: a closed run's stream ends by itself; an interrupted run's is read
// up to its current offset.
func (l *live) stop(c client.Client, h runclient.Handle, res *agentrun.RunResult) {
	defer l.cancel()
	wait := time.After(10 * time.Second)
	if res != nil && res.Status == agentrun.StatusInterrupted {
		var end int64
		if v, err := c.QueryWorkflow(l.e.ctx, h.WorkflowID, "", streams.OffsetQuery); err == nil && v.Get(&end) == nil {
			for {
				l.mu.Lock()
				caught := l.next >= end
				l.mu.Unlock()
				if caught {
					break
				}
				select {
				case <-wait:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		return
	}
	select {
	case <-l.done:
	case <-wait:
	}
	l.mu.Lock()
	l.endText()
	l.mu.Unlock()
}

// shown reports whether the live output already holds trace line tl as
// it ended (its final outcome, its content whole).
func (l *live) shown(tl agentrun.TraceLine) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines[tl.CallID] == string(tl.Outcome) && !l.cut[tl.CallID]
}

// answeredTurn reports whether the text of a turn was printed whole: its
// done item came, and what was printed is answer.
func (l *live) answeredTurn(turn int, answer string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answered[turn] && l.said[turn] == answer
}
