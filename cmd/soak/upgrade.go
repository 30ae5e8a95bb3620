package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// The upgrade drill (Options.UpgradeAt): the soak's workers are build v1
// of the agent; v2 has a changed prompt (the runs started once it is
// current carry PromptV2), one tool more (refund_status), one tool fewer
// (deploy_service, which no script calls) and a workflow change made
// without workflow.GetVersion (a side effect at every run's start, as a
// library upgrade that added a step would): v2 cannot replay a run v1
// started. On a Worker Deployment, v1 runs are pinned and drain on v1's
// workers while new runs go to v2. The control (Options.Unversioned)
// replaces v1 with v2 in a rolling restart, and v1's open runs meet v2.
const (
	BuildV1 = "v1"
	BuildV2 = "v2"
	// PromptV2 is the instructions of the runs started after the upgrade.
	PromptV2 = "Support agent v2: answer in one line."
)

// drill is the upgrade's state.
type drill struct {
	mu         sync.Mutex
	deployment string    // the Worker Deployment (empty: unversioned)
	v2         *pool     // v2's workers, once started
	at         time.Time // when new runs went to v2 (zero: not yet)
}

// buildOf names the build of the worker process whose identity (the
// SDK's "PID@HOST@") completed a workflow task: v2's pool's, or v1.
func (s *soak) buildOf(identity string) string {
	pid, _, _ := strings.Cut(identity, "@")
	s.up.mu.Lock()
	v2 := s.up.v2
	s.up.mu.Unlock()
	if v2 != nil && v2.ran(pid) {
		return BuildV2
	}
	return BuildV1
}

func (d *drill) upgradedAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// victims is the pool a worker kill picks from: v1's until the upgrade,
// then either (v1's drain while v2's take new runs) or, without
// versioning, v2's.
func (s *soak) victims() *pool {
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	if s.up.v2 == nil || (s.up.deployment != "" && rand.IntN(2) == 0) {
		return s.workers
	}
	return s.up.v2
}

// setCurrent makes build the deployment's current version, once its
// workers have polled (the server knows a version then).
func (s *soak) setCurrent(ctx context.Context, build string) error {
	h := s.c.WorkerDeploymentClient().GetHandle(s.up.deployment)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("soak: set-current-version %s: %v", build, err)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// upgrade deploys v2 at Options.UpgradeAt into the fault phase: its
// workers start, then it is made current (v1's keep polling, to drain),
// or, without versioning, v1's workers are stopped.
func (s *soak) upgrade(ctx context.Context) {
	if sleep(ctx, s.o.UpgradeAt); ctx.Err() != nil {
		return
	}
	args := slices.Clone(s.workers.args)
	if i := slices.Index(args, "--build-id"); i >= 0 {
		args[i+1] = BuildV2
	}
	args = append(args, "--v2")
	v2 := &pool{bin: s.o.Binary, args: args, log: s.o.Log, private: s.workers.private, env: s.workers.env}
	for range s.o.Workers {
		if err := v2.spawn(); err != nil {
			s.progress("upgrade: a v2 worker: %v", err)
		}
	}
	s.up.mu.Lock()
	s.up.v2 = v2
	s.up.mu.Unlock()
	if s.up.deployment != "" {
		if err := s.setCurrent(ctx, BuildV2); err != nil {
			s.progress("upgrade: %v", err)
			s.sum.violate("upgrade: v2 was not made current: %v", err)
			return
		}
		s.progress("upgrade: v2 is current; v1's workers drain")
	} else {
		s.workers.stop() // counted at the end with the others
		s.progress("upgrade: v1's workers stopped, v2's took over (no versioning)")
	}
	s.w.setPrompt(PromptV2)
	s.up.mu.Lock()
	s.up.at = time.Now()
	s.up.mu.Unlock()
	s.sum.UpgradedAtS = time.Since(s.phaseStart).Seconds()
}

// checkVersions checks one run's history in the drill: a run ends on the
// build it started on (pinned), a run started after the upgrade is v2's,
// and no workflow task failed on nondeterminism. It returns the run's
// build: its workflow tasks' Build ID or, unversioned, by when it started.
func (s *soak) checkVersions(name, runID string, hist *historypb.History) string {
	if s.o.UpgradeAt <= 0 {
		return BuildV1
	}
	at := s.up.upgradedAt()
	evs := hist.GetEvents()
	startedAfter := len(evs) > 0 && !at.IsZero() && evs[0].GetEventTime().AsTime().After(at)
	build := BuildV1
	var builds []string
	for _, ev := range evs {
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			b := a.GetDeploymentVersion().GetBuildId()
			if b == "" { // unversioned: the worker process that completed it
				b = s.buildOf(a.GetIdentity())
			}
			if !slices.Contains(builds, b) {
				builds = append(builds, b)
			}
		}
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil && a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR {
			s.sum.NondeterminismFailures++
			s.sum.violate("run %s (%s): a workflow task failed on nondeterminism (event %d): %s", name, runID, ev.GetEventId(), firstLine(a.GetFailure().GetMessage()))
		}
	}
	switch {
	case len(builds) > 1:
		s.sum.violate("run %s (%s): ran on builds %v: a run must end on the build it started on", name, runID, builds)
	case len(builds) == 1:
		if startedAfter && builds[0] != BuildV2 {
			s.sum.violate("run %s (%s): started after v2 became current, on %s", name, runID, builds[0])
		}
		build = builds[0]
	}
	if s.sum.Builds == nil {
		s.sum.Builds = map[string]int{}
	}
	s.sum.Builds[build]++
	return build
}

// v2Tools are v1's tools without deploy_service, with refund_status.
func v2Tools(tools []*activities.Tool, bill billing.Client) ([]*activities.Tool, error) {
	out := make([]*activities.Tool, 0, len(tools)+1)
	for _, t := range tools {
		if t.Spec().Name != "deploy_service" {
			out = append(out, t)
		}
	}
	status, err := activities.NewTool(protocol.ToolSpec{Name: "refund_status", Idempotent: true,
		Description: "Look a refund up at billing by its idempotency key."},
		func(ctx context.Context, in struct {
			Key string `json:"key"`
		}) (*billing.Receipt, error) {
			rc, found, err := bill.Lookup(ctx, in.Key)
			if err != nil || !found {
				return nil, err
			}
			return &rc, nil
		})
	if err != nil {
		return nil, err
	}
	return append(out, status), nil
}

// StepAtStart is v2's workflow change made without workflow.GetVersion:
// every workflow records a side effect when it starts, which no v1 history
// has (a library upgrade that added a step, say). Installed on a worker,
// it cannot replay a run an earlier build started.
type StepAtStart struct {
	interceptor.WorkerInterceptorBase
}

// InterceptWorkflow records the side effect before the workflow runs.
func (*StepAtStart) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &stepAtStartInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type stepAtStartInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *stepAtStartInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	_ = workflow.SideEffect(ctx, func(workflow.Context) any { return BuildV2 })
	return i.Next.ExecuteWorkflow(ctx, in)
}
