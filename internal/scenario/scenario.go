// Package scenario reads scenario files (docs/scenarios.md): scripted model turns
// that reproduce an agent run with no LLM. It provides the scripted model
// and a runner that plays a scenario against a Temporal server.
package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// Scenario is a scenario file.
type Scenario struct {
	Runs []Run `json:"runs"`
}

// Run is one agent run of a scenario.
type Run struct {
	Agent    string   `json:"agent,omitempty"`
	ThreadID string   `json:"thread_id,omitempty"`
	Hooks    []string `json:"hooks,omitempty"`
	Turns    []Turn   `json:"turns"`
	Resumes  []Resume `json:"resumes,omitempty"`
}

// Turn is one scripted model response.
type Turn struct {
	ToolCalls    []threadstate.ToolCall `json:"tool_calls,omitempty"`
	Text         *string                `json:"text,omitempty"`
	InstallHooks []string               `json:"install_hooks,omitempty"`
	RemoveHooks  []string               `json:"remove_hooks,omitempty"`
}

// TurnCount is the number of scripted model responses of the run, resumed
// turns included.
func (r Run) TurnCount() int {
	n := len(r.Turns)
	for _, s := range r.Resumes {
		n += len(s.Turns)
	}
	return n
}

// Resume answers an interrupt of its run.
type Resume struct {
	Answer          string `json:"answer"`
	PerformDangling bool   `json:"perform_dangling"`
	Turns           []Turn `json:"turns"`
}

// Case is a conformance case file; its Scenario is what runs.
type Case struct {
	Name     string          `json:"name"`
	Rule     string          `json:"rule"`
	Scenario *Scenario       `json:"scenario"`
	Expect   json.RawMessage `json:"expect"`
}

// Parse reads a scenario, or a conformance case file (whose "scenario" is
// used), strictly: unknown fields, a scenario with no runs, calls without
// an id or a name, repeated call ids, and hooks for which known returns
// false are errors. Unknown tools are not: the run rejects them.
func Parse(data []byte, known func(hook string) bool) (*Scenario, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("scenario is not a JSON object: %v", err)
	}
	var sc *Scenario
	if _, isCase := probe["scenario"]; isCase {
		var c Case
		if err := strictDecode(data, &c); err != nil {
			return nil, err
		}
		sc = c.Scenario
	} else {
		sc = &Scenario{}
		if err := strictDecode(data, sc); err != nil {
			return nil, err
		}
	}
	if sc == nil || len(sc.Runs) == 0 {
		return nil, errors.New("scenario has no runs")
	}
	ids := map[string]bool{}
	checkTurns := func(where string, turns []Turn) error {
		for ti, t := range turns {
			for _, h := range append(append([]string{}, t.InstallHooks...), t.RemoveHooks...) {
				if !known(h) {
					return fmt.Errorf("%s turn %d: unknown hook %q", where, ti+1, h)
				}
			}
			for ci, c := range t.ToolCalls {
				switch {
				case c.ID == "":
					return fmt.Errorf("%s turn %d call %d: no id", where, ti+1, ci+1)
				case c.Name == "":
					return fmt.Errorf("%s turn %d call %q: no tool name", where, ti+1, c.ID)
				case ids[c.ID]:
					return fmt.Errorf("%s turn %d: call id %q is used twice", where, ti+1, c.ID)
				}
				ids[c.ID] = true
			}
		}
		return nil
	}
	for ri, r := range sc.Runs {
		where := fmt.Sprintf("run %d", ri+1)
		for _, h := range r.Hooks {
			if !known(h) {
				return nil, fmt.Errorf("%s: unknown hook %q", where, h)
			}
		}
		if err := checkTurns(where, r.Turns); err != nil {
			return nil, err
		}
		for si, s := range r.Resumes {
			if err := checkTurns(fmt.Sprintf("%s resume %d", where, si+1), s.Turns); err != nil {
				return nil, err
			}
		}
	}
	return sc, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("scenario: %v", err)
	}
	return nil
}

// Model returns the scripted model of a run: it answers each request with
// the turn its phase (0 before any resume, k after the k-th) and phase turn
// name, and a final empty answer once the phase's turns run out.
func (r Run) Model() activities.Model {
	return activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		turns := r.Turns
		if req.Phase > 0 {
			if req.Phase > len(r.Resumes) {
				return activities.ModelResponse{}, nil
			}
			turns = r.Resumes[req.Phase-1].Turns
		}
		i := req.PhaseTurn - 1
		if i < 0 || i >= len(turns) {
			return activities.ModelResponse{}, nil
		}
		t := turns[i]
		resp := activities.ModelResponse{ToolCalls: t.ToolCalls, InstallHooks: t.InstallHooks, RemoveHooks: t.RemoveHooks}
		if t.Text != nil {
			resp.Text = *t.Text
		}
		return resp, nil
	})
}

// ThreadModel is one model that plays runs[i] in the i-th run of a thread:
// register it under one name and start every run of the thread with it. A
// run's place on the thread is the number of final answers (assistant
// messages without tool calls) in the conversation it is shown: each
// earlier run ended with one. A run that failed before its answer is not
// counted; a thread's runs past the last script answer nothing.
func ThreadModel(runs ...Run) activities.Model {
	models := make([]activities.Model, len(runs))
	for i, r := range runs {
		models[i] = r.Model()
	}
	return activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		i := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" && len(m.ToolCalls) == 0 {
				i++
			}
		}
		if i >= len(models) {
			return activities.ModelResponse{}, nil
		}
		return models[i].Respond(ctx, req)
	})
}

// ModelName is the worker's model name for run i (0-based) under prefix.
func ModelName(prefix string, i int) string { return fmt.Sprintf("scenario:%s:run-%d", prefix, i+1) }

// Models returns the scripted models of every run, named by ModelName.
func (s *Scenario) Models(prefix string) map[string]activities.Model {
	out := make(map[string]activities.Model, len(s.Runs))
	for i, r := range s.Runs {
		out[ModelName(prefix, i)] = r.Model()
	}
	return out
}
