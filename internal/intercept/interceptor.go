// Package intercept is tulip's workflow interceptor: a thin adapter that
// routes each tool call's ExecuteActivity (and ExecuteLocalActivity)
// through the run's execution log (package calllog), which serves a
// matching idempotent call as an already-settled future (no command, so no
// history event) or lets it run. It holds no state of its own: the run owns
// the log. Activities the run did not mark as a call pass through.
//
// A run checks Installed at its start: without the interceptor it fails
// with tulip.PluginMissing instead of running without dedup.
package intercept

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/calllog"
)

// Interceptor is tulip's worker interceptor. The zero value is ready.
type Interceptor struct {
	interceptor.WorkerInterceptorBase
}

var _ interceptor.WorkerInterceptor = (*Interceptor)(nil)

// New returns tulip's worker interceptor.
func New() *Interceptor { return &Interceptor{} }

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (*Interceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowInbound{}
	i.Next = next
	return i
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &workflowOutbound{}
	o.Next = outbound
	return i.Next.Init(o)
}

func (i *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflow.WithValue(ctx, installedKey{}, true), in)
}

type installedKey struct{}

// Installed reports whether the interceptor routes the workflow's calls.
func Installed(ctx workflow.Context) bool {
	ok, _ := ctx.Value(installedKey{}).(bool)
	return ok
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if c := calllog.CallOf(ctx); c != nil {
		return c.Start(ctx, func() workflow.Future { return o.Next.ExecuteActivity(ctx, activityType, args...) })
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

// ExecuteLocalActivity is ExecuteActivity for a tool declared Local.
func (o *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if c := calllog.CallOf(ctx); c != nil {
		return c.Start(ctx, func() workflow.Future { return o.Next.ExecuteLocalActivity(ctx, activityType, args...) })
	}
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}
