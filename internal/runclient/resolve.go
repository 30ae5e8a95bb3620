package runclient

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Runs hand their state on by reference (workflow/refs.go): a result's
// trace leaves out content over agentrun.InlineLimit, and a log's records
// from earlier runs are thin. The functions here read that content back
// from the runs that hold it (the tulip.page query), so what they return is
// whole.

// Trace returns a run's whole trace, from its result (or state) as Await
// returned it: the lines runs hold by reference (res.TraceParts) read from
// them, and a served call's result that another run holds (ResultIn) read
// from the conversation. A result that holds its whole trace is returned
// as it is, with no query.
func Trace(ctx context.Context, c client.Client, h Handle, res *agentrun.RunResult) ([]agentrun.TraceLine, error) {
	if res == nil {
		return nil, nil
	}
	var out []agentrun.TraceLine
	for _, p := range res.TraceParts {
		lines, err := fetchTrace(ctx, c, h.WorkflowID, p.Run, p.From, p.To)
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	if len(out) != res.TraceFrom {
		return nil, fmt.Errorf("agent: the trace's parts hold %d lines, its result starts at line %d", len(out), res.TraceFrom)
	}
	out = append(out, res.Trace...)
	var cur *Handle
	handle := func() (Handle, error) {
		if cur == nil {
			h, err := current(ctx, c, h)
			if err != nil {
				return h, err
			}
			cur = &h
		}
		return *cur, nil
	}
	msgs := messageReader{c: c}
	for i := range out {
		if in := out[i].ResultIn; in != nil && out[i].Result == nil {
			hh, err := handle()
			if err != nil {
				return nil, err
			}
			content, err := msgs.content(ctx, hh, *in)
			if err != nil {
				return nil, err
			}
			out[i].Result = json.RawMessage(content)
		}
	}
	return out, nil
}

func fetchTrace(ctx context.Context, c client.Client, workflowID, runID string, from, to int) ([]agentrun.TraceLine, error) {
	var out []agentrun.TraceLine
	for from < to {
		v, err := c.QueryWorkflow(ctx, workflowID, runID, agentrun.QueryPage, threadstate.PageRequest{Kind: threadstate.PageTrace, From: from, To: to})
		if err != nil {
			return nil, fmt.Errorf("agent: reading the trace of run %s: %w", runID, err)
		}
		var p agentrun.Page
		if err := v.Get(&p); err != nil {
			return nil, err
		}
		if p.Next <= from {
			return nil, fmt.Errorf("agent: run %s answered trace [%d, %d) with a page ending at %d", runID, from, to, p.Next)
		}
		if p.Holder != "" {
			more, err := fetchTrace(ctx, c, workflowID, p.Holder, from, p.Next)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		} else {
			out = append(out, p.Trace...)
		}
		from = p.Next
	}
	return out, nil
}

// messageReader reads single messages of a conversation, caching the
// ranges it read.
type messageReader struct {
	c    client.Client
	have map[int]string
}

func (m *messageReader) content(ctx context.Context, h Handle, i int) (string, error) {
	if s, ok := m.have[i]; ok {
		return s, nil
	}
	msgs, err := threadstate.FetchMessages(ctx, m.c, h.WorkflowID, h.RunID, i, i+1)
	if err != nil {
		return "", err
	}
	if in := msgs[0].ContentIn; in != nil {
		if *in >= i {
			return "", fmt.Errorf("agent: message %d refers to message %d, which does not come before it", i, *in)
		}
		return m.content(ctx, h, *in) // a served message: its content is an earlier one's
	}
	if m.have == nil {
		m.have = map[int]string{}
	}
	m.have[i] = msgs[0].Content
	return msgs[0].Content, nil
}

// resolveRecords reads back in full the records of agent's log that run h
// holds by reference: thin records from their holders, results from the
// conversation.
func resolveRecords(ctx context.Context, c client.Client, h Handle, agent string, recs []dedup.Record) ([]dedup.Record, error) {
	thin := 0
	for thin < len(recs) && recs[thin].Thin() {
		thin++
	}
	if thin > 0 {
		full, err := threadstate.FetchRecords(ctx, c, h.WorkflowID, h.RunID, agent, 0, thin)
		if err != nil {
			return nil, err
		}
		recs = append(full, recs[thin:]...)
	}
	msgs := messageReader{c: c}
	for i := range recs {
		if in := recs[i].ResultIn; in != nil && recs[i].Result == nil {
			content, err := msgs.content(ctx, h, *in)
			if err != nil {
				return nil, err
			}
			recs[i].Result = json.RawMessage(content)
		}
	}
	return recs, nil
}
