package agentrun

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// ApprovalHook names, in an Interrupt, the approval a tool declared with
// ToolSpec.Approval asks before each call it would run.
const ApprovalHook = "tulip.approval"

// listToolsets starts reading the worker's toolsets' tools, when it has any:
// whether it has is recorded (a side effect) and the list is the
// activity's result, so a replay on any worker, with or without those
// toolsets, takes the same path and sees the same tools. Nil: none.
func (r *run) listToolsets(ctx wf.Context) wf.Future {
	var names []string
	if err := wf.SideEffect(ctx, func(wf.Context) any { return r.cfg.Toolsets }).Get(&names); err != nil || len(names) == 0 {
		return nil
	}
	actx := wf.WithActivityOptions(ctx, wf.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            retryUntilWindow(),
		ScheduleToCloseTimeout: RetryWindow,
	})
	return wf.ExecuteActivity(actx, protocol.ListToolsActivity)
}

// addToolsets makes the toolsets' tools callable in this run.
func (r *run) addToolsets(specs []protocol.ToolSpec) {
	if len(specs) == 0 {
		return
	}
	r.toolsets = specs
	r.tools = maps.Clone(r.tools)
	for _, s := range specs {
		if _, ok := r.tools[s.Name]; !ok {
			r.tools[s.Name] = activities.ToolFromSpec(s)
		}
	}
}

// needsApproval reports whether a call of tool would run (not be served
// from the log) and the tool asks approval before it runs: a call the log
// serves runs nothing, so it asks nothing.
func (r *run) needsApproval(tool *activities.Tool, args *dedup.Args, response int) (string, bool) {
	spec := tool.Spec()
	if !spec.Approval {
		return "", false
	}
	if spec.Idempotent && !r.resumed {
		if rec, _ := r.log.FindMatchingExecution(spec.Name, args, response); rec != nil {
			return "", false
		}
	}
	src := "it"
	if spec.Toolset != "" {
		src = fmt.Sprintf("toolset %q", spec.Toolset)
	}
	return fmt.Sprintf("%s may change or delete what it acts on (%s says so): approve to run this call", spec.Name, src), true
}

// narrowTools leaves the run the tools its input names (RunInput.Tools:
// tool and toolset names; none: every tool of the worker), and never
// offers a sub-agent itself: a sub-agent tool whose agent is this run's
// (runs recorded before "tulip-subagent-not-self" were offered it).
func (r *run) narrowTools(ctx wf.Context) error {
	var self []string
	for name, t := range r.tools {
		if sub := t.SubAgent(); sub != nil && sub.Agent == r.in.Agent {
			self = append(self, name)
		}
	}
	if len(self) > 0 && r.version(ctx, "tulip-subagent-not-self") == wf.DefaultVersion {
		self = nil
	}
	if len(r.in.Tools) == 0 && len(self) == 0 {
		return nil
	}
	named := map[string]bool{}
	for _, n := range r.in.Tools {
		named[n] = false
	}
	kept := make(map[string]*activities.Tool, len(r.tools))
	for name, t := range r.tools {
		if slices.Contains(self, name) {
			if _, ok := named[name]; ok {
				named[name] = true // named, and still not offered
			}
			continue
		}
		ts := t.Spec().Toolset
		_, byName := named[name]
		_, bySet := named[ts]
		if len(r.in.Tools) > 0 && !byName && !(ts != "" && bySet) {
			continue
		}
		named[name] = true
		if ts != "" {
			if _, ok := named[ts]; ok {
				named[ts] = true
			}
		}
		kept[name] = t
	}
	for _, n := range r.in.Tools {
		if !named[n] {
			has := slices.Sorted(maps.Keys(r.tools))
			return badInput(fmt.Sprintf("agent %s: no tool or toolset named %q on this worker (its tools: %s)", r.in.Agent, n, strings.Join(has, ", ")))
		}
	}
	offered := slices.Sorted(maps.Keys(kept))
	r.tools, r.offered = kept, &offered
	return nil
}
