package mcp

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/internal/activities"
)

// OpenOptions tune Open. Zero values are documented per field.
type OpenOptions struct {
	// Options apply to every toolset.
	Options
	// GoTools are the worker's Go tool names, checked for clashes with the
	// servers' tools. Zero value: none.
	GoTools []string
}

// Set is the toolsets of several servers, opened together.
type Set struct {
	sets []*Toolset
}

// Open makes the toolsets of servers, connects to each and lists its tools
// (concurrently; ctx bounds it all), and refuses, on one line, a
// configuration that would not work: an invalid Server, two servers with
// one name, a server that cannot be reached or listed, a tool name offered
// twice (by two servers, or by a server and a Go tool) unless a prefix
// separates them, or an Idempotent or NotIdempotent entry naming no listed
// tool. On an error every connection made is closed. At most one
// OpenOptions.
func Open(ctx context.Context, servers []Server, opts ...OpenOptions) (*Set, error) {
	if len(opts) > 1 {
		return nil, errors.New("mcp: Open takes at most one OpenOptions")
	}
	var o OpenOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	names := map[string]bool{}
	set := &Set{}
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		if names[s.Name] {
			return nil, &DuplicateServerError{Server: s.Name}
		}
		names[s.Name] = true
		t, err := New(s, o.Options)
		if err != nil {
			return nil, err
		}
		set.sets = append(set.sets, t)
	}
	lists := make([][]ToolInfo, len(set.sets))
	errs := make([]error, len(set.sets))
	var wg sync.WaitGroup
	for i, t := range set.sets {
		wg.Go(func() { lists[i], errs[i] = t.Describe(ctx) })
	}
	wg.Wait()
	fail := func(err error) (*Set, error) {
		_ = set.Close()
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return fail(err)
		}
	}
	tools, err := activities.NewToolNames(o.GoTools...)
	if err != nil {
		return fail(err)
	}
	for i, t := range set.sets {
		listed := map[string]bool{}
		for _, info := range lists[i] {
			listed[info.MCPName] = true
			var clash *activities.ClashError
			if err := tools.Add(info.Spec.Name, t.srv.Name); errors.As(err, &clash) {
				return fail(&ClashError{Tool: clash.Tool, First: clash.First, Second: clash.Second})
			}
		}
		for _, l := range []struct {
			name  string
			tools []string
		}{{"Idempotent", t.srv.Idempotent}, {"NotIdempotent", t.srv.NotIdempotent}} {
			for _, tool := range l.tools {
				if !listed[tool] {
					return fail(&OverrideError{Server: t.srv.Name, List: l.name, Tool: tool})
				}
			}
		}
	}
	return set, nil
}

// Toolsets are the set's toolsets, in the order of the servers, for
// tulip.Options.Tools.
func (s *Set) Toolsets() []tulip.Toolset {
	out := make([]tulip.Toolset, len(s.sets))
	for i, t := range s.sets {
		out[i] = t
	}
	return out
}

// Toolset is the toolset of the server named name, or nil.
func (s *Set) Toolset(name string) *Toolset {
	i := slices.IndexFunc(s.sets, func(t *Toolset) bool { return t.Name() == name })
	if i < 0 {
		return nil
	}
	return s.sets[i]
}

// Close closes every toolset (stopping stdio servers), and returns the
// first error.
func (s *Set) Close() error {
	if s == nil {
		return nil
	}
	errs := make([]error, len(s.sets))
	var wg sync.WaitGroup
	for i, t := range s.sets {
		wg.Go(func() { errs[i] = t.Close() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
