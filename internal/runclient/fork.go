package runclient

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// ForkError: a thread cannot be forked where asked (kind tulip.BadInput).
type ForkError struct {
	Thread string
	Reason string
}

func (e *ForkError) Error() string { return "fork of thread " + e.Thread + ": " + e.Reason }

// Kind is the error's tulip kind.
func (e *ForkError) Kind() tulip.ErrorKind { return tulip.BadInput }

// Fork reads thread's state and makes the input of a fork of it at model
// response at (1-based) for agent ("": the default): the conversation and
// the agent's log before that response, and the agent's whole log to
// serve from (docs/forks.md).
func Fork(ctx context.Context, c client.Client, thread, agent string, at int, live bool) (*agentrun.ForkInput, error) {
	cp, err := Thread(ctx, c, thread)
	if err != nil {
		return nil, err
	}
	return ForkOf(cp, thread, agent, at, live)
}

// Responses counts a conversation's model responses.
func Responses(msgs []threadstate.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// ForkOf is Fork of a thread state read already (in full: its messages'
// content filled in, as Thread returns it).
func ForkOf(cp *threadstate.Checkpoint, thread, agent string, at int, live bool) (*agentrun.ForkInput, error) {
	if agent == "" {
		agent = agentrun.DefaultAgent
	}
	if cp == nil || cp.Conversation != nil {
		return nil, &ForkError{Thread: thread, Reason: "its state is not in full"}
	}
	n := Responses(cp.Messages)
	if at < 1 || at > n {
		return nil, &ForkError{Thread: thread, Reason: fmt.Sprintf("it has %d model responses: fork at 1 to %d, not %d", n, n, at)}
	}
	for _, name := range slices.Sorted(maps.Keys(cp.Agents)) {
		if name == agent {
			continue
		}
		if l, err := restoreOf(cp, name); err != nil || l != nil && (l.Len() > 0 || l.Response() > 0) {
			return nil, &ForkError{Thread: thread, Reason: fmt.Sprintf("agent %s has a log on it too: a fork takes a thread of one agent", name)}
		}
	}
	cut, seen := len(cp.Messages), 0
	for i, m := range cp.Messages {
		if m.Role == "assistant" {
			if seen++; seen == at {
				cut = i
				break
			}
		}
	}
	l, err := restoreOf(cp, agent)
	if err != nil {
		return nil, &ForkError{Thread: thread, Reason: err.Error()}
	}
	var recs []dedup.Record
	responses := 0
	if l != nil {
		recs, responses = l.Records(), l.Response()
		if responses != n {
			// The log's responses are what a record's Response counts:
			// they must be the conversation's, or the cut would fall
			// elsewhere in the log than in the conversation.
			return nil, &ForkError{Thread: thread, Reason: fmt.Sprintf("agent %s's log counts %d model responses and the conversation %d", agent, responses, n)}
		}
	}
	var kept []dedup.Record
	for i := range recs {
		r := &recs[i]
		if r.Result == nil && r.ResultIn != nil && *r.ResultIn >= 0 && *r.ResultIn < len(cp.Messages) {
			// The origin's result, whole: the fork serves it with no
			// message of its own to refer to.
			r.Result, r.ResultIn = json.RawMessage(cp.Messages[*r.ResultIn].Content), nil
		}
		if r.Response < at {
			kept = append(kept, *r)
		}
	}
	keptLog, err := dedup.FromRecords(at-1, kept)
	if err != nil {
		return nil, &ForkError{Thread: thread, Reason: err.Error()}
	}
	keptSnap, err := keptLog.Snapshot()
	if err != nil {
		return nil, err
	}
	recs = append(recs, PerformedRecords(cp, agent, len(recs))...)
	originLog, err := dedup.FromRecords(max(responses, at-1), recs)
	if err != nil {
		return nil, &ForkError{Thread: thread, Reason: err.Error()}
	}
	originSnap, err := originLog.Snapshot()
	if err != nil {
		return nil, err
	}
	msgs := slices.Clone(cp.Messages[:cut])
	state := &threadstate.Checkpoint{Agents: map[string]json.RawMessage{agent: keptSnap}, Messages: msgs,
		Fork: &threadstate.ForkOf{Thread: thread, At: at, Live: live}}
	return &agentrun.ForkInput{Thread: thread, At: at, State: state, Origin: originSnap, Live: live}, nil
}

// restoreOf is agent's log in cp, or nil.
func restoreOf(cp *threadstate.Checkpoint, agent string) (*dedup.Log, error) {
	if cp.Agents[agent] == nil {
		return nil, nil
	}
	return dedup.Restore(cp.Agents[agent])
}

// PerformedRecords are the held calls resumes performed for agent on a
// thread (its state in full), as records numbered from seq on: calls that
// ran outside the execution log (docs/rules.md), which a fork serves as it
// serves the log's (docs/forks.md).
func PerformedRecords(cp *threadstate.Checkpoint, agent string, seq int) []dedup.Record {
	if agent == "" {
		agent = agentrun.DefaultAgent
	}
	var out []dedup.Record
	for _, p := range cp.Performed[agent] {
		rec := dedup.Record{Seq: seq + len(out), Tool: p.Tool, Arguments: p.Arguments, Response: p.Response, CallID: p.CallID,
			Origin: dedup.Executed, Key: p.Key, Error: p.Error}
		if p.Error == nil {
			if p.Message < 0 || p.Message >= len(cp.Messages) || cp.Messages[p.Message].ToolCallID != p.CallID {
				continue // its result is not where it says: nothing to serve
			}
			rec.Result = json.RawMessage(cp.Messages[p.Message].Content)
		}
		out = append(out, rec)
	}
	return out
}
