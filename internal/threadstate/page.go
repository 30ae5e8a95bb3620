package threadstate

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// QueryPage pages what a run holds (PageRequest → Page): its conversation,
// an agent's log, or its trace lines. A run holds in full only what entered
// its own history; for the rest (a thread's earlier runs, the runs before
// it in a continue-as-new chain) it answers with the run that holds it
// (Page.Holder), and the reader asks that run, closed or not. Queries add
// nothing to history.
const QueryPage = "tulip.page"

// The kinds of a PageRequest.
const (
	PageMessages = "messages"
	PageRecords  = "records"
	PageTrace    = "trace"
)

// PageRequest asks QueryPage for the items [From, To) of a kind.
type PageRequest struct {
	// Kind is PageMessages, PageRecords or PageTrace.
	Kind string `json:"kind"`
	// Agent names whose log (PageRecords). Zero value: the run's agent.
	Agent string `json:"agent,omitempty"`
	From  int    `json:"from"`
	// To ends the range (exclusive). Zero value: the end.
	To int `json:"to,omitempty"`
}

// PageBytes bounds a page's items (a query answer must fit in a gRPC
// message); a page holds at least one item.
const PageBytes = 1 << 20

// Page answers a PageRequest: the items [From, Next) in full, or, when
// Holder is set, none: those items are held by the run Holder (of the same
// workflow ID), to be asked the same request. Total is how many items of
// the kind the run has. Records of a log held elsewhere are thin
// (dedup.Record.Thin); their holder answers them in full.
type Page struct {
	From     int            `json:"from"`
	Next     int            `json:"next"`
	Total    int            `json:"total"`
	Holder   string         `json:"holder,omitempty"`
	Messages []Message      `json:"messages,omitempty"`
	Records  []dedup.Record `json:"records,omitempty"`
}

// pager reads pages from the runs of one workflow ID, following holders.
type pager struct {
	c          client.Client
	workflowID string
}

func (p pager) page(ctx context.Context, runID string, req PageRequest, into any) error {
	v, err := p.c.QueryWorkflow(ctx, p.workflowID, runID, QueryPage, req)
	if deleted(err) {
		return &goneRun{run: runID}
	}
	if err != nil {
		return fmt.Errorf("reading %s of run %s of %s: %w", req.Kind, runID, p.workflowID, err)
	}
	return v.Get(into)
}

// walk reads items [from, to) of req.Kind from runID, page by page with
// read, which reports each page's Next and Holder; the ranges a holder
// holds are read from it (recursively). A page that does not move on is an
// error.
func (p pager) walk(ctx context.Context, runID string, req PageRequest, from, to int,
	read func(runID string, req PageRequest) (next int, holder string, err error)) error {
	for from < to {
		req.From, req.To = from, to
		next, holder, err := read(runID, req)
		if err != nil {
			return err
		}
		if next <= from || next > to {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run %s of %s answered %s [%d, %d) with a page ending at %d", runID, p.workflowID, req.Kind, from, to, next), protocol.ErrConversation, nil)
		}
		if holder != "" {
			if holder == runID {
				return temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("run %s of %s names itself as the holder of its %s", runID, p.workflowID, req.Kind), protocol.ErrConversation, nil)
			}
			if err := p.walk(ctx, holder, req, from, next, read); err != nil {
				return err
			}
		}
		from = next
	}
	return nil
}

// FetchMessages reads messages [from, to) of the conversation run runID of
// workflowID holds or refers to, from every run that holds a part of them.
// Messages that refer to another message's content (ContentIn) are
// returned as they are; see ResolveContent.
func FetchMessages(ctx context.Context, c client.Client, workflowID, runID string, from, to int) ([]Message, error) {
	return FetchMessagesWithStored(ctx, c, workflowID, runID, from, to, nil)
}

// FetchMessagesWithStored is FetchMessages that takes the messages a deleted run held
// from stored (the thread's state in full, from its store) when stored has
// them.
func FetchMessagesWithStored(ctx context.Context, c client.Client, workflowID, runID string, from, to int, stored []Message) ([]Message, error) {
	return fetchPages(ctx, c, workflowID, runID, PageRequest{Kind: PageMessages}, from, to, stored,
		func(pg *Page) []Message { return pg.Messages })
}

// FetchRecords reads records [from, to) of agent's log as run runID of
// workflowID holds it, each in full from the run that holds it. A record
// whose result is in a message (ResultIn) keeps it there; see
// ResolveRecords.
func FetchRecords(ctx context.Context, c client.Client, workflowID, runID, agent string, from, to int) ([]dedup.Record, error) {
	return fetchRecords(ctx, c, workflowID, runID, agent, from, to, nil)
}

// fetchRecords is FetchRecords that takes the records a deleted run held
// from stored (the agent's log in full, from the thread's store) when
// stored has them.
func fetchRecords(ctx context.Context, c client.Client, workflowID, runID, agent string, from, to int, stored []dedup.Record) ([]dedup.Record, error) {
	return fetchPages(ctx, c, workflowID, runID, PageRequest{Kind: PageRecords, Agent: agent}, from, to, stored,
		func(pg *Page) []dedup.Record { return pg.Records })
}

// fetchPages reads items [from, to) of the kind req names, as run runID
// of workflowID holds them, each page from the run that holds it (items
// picks them out of a page); a page a deleted run held comes from stored
// when stored has it.
func fetchPages[T any](ctx context.Context, c client.Client, workflowID, runID string, req PageRequest, from, to int, stored []T,
	items func(*Page) []T) ([]T, error) {
	p := pager{c: c, workflowID: workflowID}
	out := make([]T, 0, to-from)
	err := p.walk(ctx, runID, req, from, to, func(run string, req PageRequest) (int, string, error) {
		var pg Page
		if err := p.page(ctx, run, req, &pg); err != nil {
			if deleted(err) && req.To > req.From && req.To <= len(stored) {
				out = append(out, stored[req.From:req.To]...)
				return req.To, "", nil
			}
			return 0, "", err
		}
		if pg.Holder == "" {
			got := items(&pg)
			if len(got) != pg.Next-req.From {
				return 0, "", fmt.Errorf("run %s answered %d %s for [%d, %d)", run, len(got), req.Kind, req.From, pg.Next)
			}
			out = append(out, got...)
		}
		return pg.Next, pg.Holder, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ResolveContent fills in the content of every message that refers to an
// earlier one (ContentIn), in place: msgs must start at the conversation's
// first message.
func ResolveContent(msgs []Message) error {
	for i := range msgs {
		if in := msgs[i].ContentIn; in != nil {
			if *in < 0 || *in >= i {
				return temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("message %d refers to message %d, which does not come before it", i, *in), protocol.ErrConversation, nil)
			}
			msgs[i].Content, msgs[i].ContentIn = msgs[*in].Content, nil
		}
	}
	return nil
}

// deleted: the run asked is gone (retention).
func deleted(err error) bool {
	var nf *serviceerror.NotFound
	var gone *goneRun
	return errors.As(err, &nf) || errors.As(err, &gone)
}
