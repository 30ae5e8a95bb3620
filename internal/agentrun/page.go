package agentrun

import (
	"encoding/json"
	"fmt"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// page answers QueryPage. A run answers in full what it holds; for a range
// another run holds, it answers with no items and that run (Holder), up to
// where that run's part ends. To zero or past the end is the end; From past
// the end is an empty page whose Next is Total.
func (r *run) page(raw json.RawMessage) (Page, error) {
	var req threadstate.PageRequest
	if err := decodeStrict("page request", raw, &req); err != nil {
		return Page{}, err
	}
	if req.From < 0 || req.To < 0 {
		return Page{}, fmt.Errorf("page [%d, %d): negative bounds", req.From, req.To)
	}
	switch req.Kind {
	case threadstate.PageMessages:
		return r.pageMessages(req), nil
	case threadstate.PageRecords:
		return r.pageRecords(req)
	case threadstate.PageTrace:
		return r.pageTrace(req), nil
	}
	return Page{}, fmt.Errorf("page kind %q is not %q, %q or %q", req.Kind, threadstate.PageMessages, threadstate.PageRecords, threadstate.PageTrace)
}

// bounds clamps [from, to) to [0, total).
func bounds(req threadstate.PageRequest, total int) (from, to int) {
	to = req.To
	if to == 0 || to > total {
		to = total
	}
	return min(req.From, to), to
}

// fill adds items [from, to) with add, which returns each one's size, until
// the page is full (it holds at least one) or stop says an item is not this
// run's to answer, and returns where it stopped.
func fill(from, to int, stop func(i int) bool, add func(i int) int) int {
	size := 0
	for i := from; i < to; i++ {
		if (i > from && size >= threadstate.PageBytes) || stop(i) {
			return i
		}
		size += add(i)
	}
	return to
}

func never(int) bool { return false }

func jsonSize(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

func (r *run) pageMessages(req threadstate.PageRequest) Page {
	total := r.convLen()
	from, to := bounds(req, total)
	p := Page{Page: threadstate.Page{From: from, Next: from, Total: total}}
	if from < r.base {
		for _, part := range r.parts {
			if from >= part.From && from < part.To {
				p.Holder, p.Next = part.Run, min(part.To, to)
				return p
			}
		}
	}
	p.Messages = []threadstate.Message{}
	p.Next = fill(from, to, never, func(i int) int {
		m := &r.messages[i-r.base]
		p.Messages = append(p.Messages, *m)
		return threadstate.MessageJSONSize(m)
	})
	return p
}

func (r *run) pageRecords(req threadstate.PageRequest) (Page, error) {
	agent := req.Agent
	if agent == "" {
		agent = r.in.Agent
	}
	var recs []dedup.Record
	if agent == r.in.Agent {
		recs = r.log.Records()
	} else if snap, ok := r.loadedAgents()[agent]; ok {
		l, err := dedup.Restore(snap)
		if err != nil {
			return Page{}, err
		}
		recs = l.Records()
	}
	total := len(recs)
	from, to := bounds(req, total)
	p := Page{Page: threadstate.Page{From: from, Next: from, Total: total}}
	if from < to && recs[from].Thin() {
		holder := recs[from].HeldBy()
		i := from
		for i < to && recs[i].Thin() && recs[i].HeldBy() == holder {
			i++
		}
		p.Holder, p.Next = holder, i
		return p, nil
	}
	p.Records = []dedup.Record{}
	p.Next = fill(from, to, func(i int) bool { return recs[i].Thin() }, func(i int) int {
		p.Records = append(p.Records, recs[i])
		return jsonSize(recs[i])
	})
	return p, nil
}

func (r *run) pageTrace(req threadstate.PageRequest) Page {
	total := r.traceBase + len(r.trace)
	from, to := bounds(req, total)
	p := Page{Page: threadstate.Page{From: from, Next: from, Total: total}}
	if from < r.traceBase {
		for _, part := range r.traceParts {
			if from >= part.From && from < part.To {
				p.Holder, p.Next = part.Run, min(part.To, to)
				return p
			}
		}
	}
	p.Trace = []TraceLine{}
	p.Next = fill(from, to, never, func(i int) int {
		l := r.trace[i-r.traceBase]
		p.Trace = append(p.Trace, l)
		return jsonSize(l)
	})
	return p
}
