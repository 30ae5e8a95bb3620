// Package workerplugin installs tulip on a Temporal worker: the agent-run
// workflow, the tool, model and checkpoint activities, and the dedup
// interceptor.
//
// On a real worker (and on a workflow replayer) use NewPlugin. Test
// environments run no plugins: call Register and add NewInterceptor to the
// worker options yourself.
package workerplugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/intercept"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// PluginName is the plugin's name.
const PluginName = "tulip"

// PublicModels are models of package tulip's Model interface, by name, as
// a worker's (Options.Models); nil for nil.
func PublicModels[M any](models map[string]M) map[string]activities.Model {
	if models == nil {
		return nil
	}
	out := make(map[string]activities.Model, len(models))
	for name, m := range models {
		out[name] = activities.PublicModel(m)
	}
	return out
}

// PublicToolsets are toolsets of package tulip's Toolset interface as a
// worker's (Options.Toolsets).
func PublicToolsets[T any](toolsets []T) []activities.Toolset {
	var out []activities.Toolset
	for _, ts := range toolsets {
		out = append(out, activities.PublicToolset(ts))
	}
	return out
}

// Options configure tulip on a worker. The zero value registers the workflow
// with no tools, hooks or models.
type Options struct {
	// Tools the agent may call.
	Tools []*activities.Tool
	// Toolsets are tools discovered at run time (MCP servers: package
	// github.com/tulip-temporal/tulip/mcp). Each run reads their lists
	// once, in an activity, so the list it uses is in its history. Zero
	// value: none.
	Toolsets []activities.Toolset
	// Hooks by name, for RunInput.Hooks and mid-run installs.
	Hooks map[string]hooks.Hook
	// Models by name, for RunInput.Model.
	Models map[string]activities.Model
	// Checkpointer loads and saves thread checkpoints. Zero value (nil):
	// threadstate.TemporalCheckpointer, which needs nothing but Temporal;
	// its threads last as long as the namespace keeps their runs'
	// histories. To keep threads past the namespace's retention, give it
	// a thread store: threadstate.TemporalCheckpointer{Store: ...}
	// (docs/threads.md).
	Checkpointer threadstate.Checkpointer
	// Conversation chooses what a model is shown of the thread's
	// conversation (for example activities.LastTurns(10)). It never
	// changes what the logs hold or how calls match. Zero value:
	// everything.
	Conversation activities.ConversationPolicy
	// ConversationCache is the model activity's cache of conversations,
	// shared by the worker's runs (a conversation it no longer holds is
	// read from its run). Zero value: activities.DefaultCacheNodes nodes
	// and activities.DefaultCacheBytes (64 MiB) of messages; set a bound
	// with activities.NewConversationCacheBytes.
	ConversationCache *activities.ConversationCache
	// PayloadLimit is the largest payload a run, a model response or a tool
	// result may be (tulip.PayloadTooLarge beyond it, before anything is
	// lost). Zero value: a little under Temporal's 2 MiB; or, when the
	// plugin is given to the client (client.Options.Plugins) and the client
	// stores large payloads externally (client.Options.ExternalStorage, see
	// package blobstore), no limit. -1: no limit.
	PayloadLimit int
	// ModelHeartbeatTimeout is how long a model call may go without a
	// heartbeat (tulip sends them while the model answers) before Temporal
	// retries it, on another worker when this one died. Zero value:
	// activities.DefaultHeartbeatTimeout (5 s). Negative: none. A tool's
	// is its ToolOptions.HeartbeatTimeout.
	ModelHeartbeatTimeout time.Duration
	// ModelTimeout bounds one attempt of a model call (a long answer
	// streams for minutes; a dead worker is found by the heartbeat, a
	// stalled model by its adapter's idle timeout). Zero value:
	// agentrun.DefaultModelTimeout (10 minutes).
	ModelTimeout time.Duration
	// ContextTokens are, per model name, the most input tokens a model
	// call may send (activities.Models.Budgets). None: no budget.
	ContextTokens map[string]int
	// StopTimeout is how long a stopping worker (Stop, SIGTERM in the
	// CLI) lets in-flight activities finish before it cancels them; a
	// cancelled one is retried elsewhere after its heartbeat timeout.
	// Zero value: 10 s, unless the worker's own WorkerStopTimeout is set.
	StopTimeout time.Duration
	// Observer receives each tool-call decision and model call once, never
	// during replay (an OpenTelemetry one: github.com/tulip-temporal/tulip/otel).
	// Zero value: none. Metrics go to the client's MetricsHandler either way.
	Observer agentrun.Observer
	// MetricAgents lists the agent names that tag this worker's metrics
	// (label agent); runs of any other agent are tagged "other", so a
	// client's string never becomes a new series. Zero value: the first
	// agentrun.DefaultMetricAgentLimit (100) distinct agents this worker
	// runs, then "other". Spans (Observer) carry the name either way.
	MetricAgents []string
}

func (o Options) config() agentrun.Config {
	cfg := agentrun.Config{Tools: o.Tools, Hooks: o.Hooks, CustomCheckpointer: o.Checkpointer != nil && threadStore(o.Checkpointer) == nil, PayloadLimit: o.PayloadLimit,
		Observer: o.Observer, ModelHeartbeatTimeout: o.ModelHeartbeatTimeout, ModelTimeout: o.ModelTimeout, MetricAgents: o.MetricAgents}
	for _, ts := range o.Toolsets {
		cfg.Toolsets = append(cfg.Toolsets, ts.Name())
	}
	return cfg
}

// Registry is what Register needs: a worker, a workflow replayer, a test
// environment or a plugin's registry. Activities are registered when it
// also implements ActivityRegistry (a replayer does not: it runs none).
type Registry interface {
	RegisterWorkflowWithOptions(w any, options sdkworkflow.RegisterOptions)
}

// ActivityRegistry registers activities.
type ActivityRegistry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// DynamicActivityRegistry registers the activity that takes every activity
// type no other handles: with toolsets, the worker's toolset tools.
type DynamicActivityRegistry interface {
	RegisterDynamicActivity(a any, options activity.DynamicRegisterOptions)
}

// Register registers the agent-run workflow and tulip's activities on r. It
// does not install the interceptor (see NewInterceptor).
func Register(r Registry, opts Options) error {
	run, err := agentrun.New(opts.config())
	if err != nil {
		return err
	}
	// Pinned: on a worker of a Worker Deployment Version, a run ends on
	// the code it started on; the thread's next run (a new execution) and
	// a continue-as-new start on the current version (docs/deploy.md).
	// Ignored by a worker without versioning.
	r.RegisterWorkflowWithOptions(run, sdkworkflow.RegisterOptions{Name: agentrun.WorkflowName, VersioningBehavior: sdkworkflow.VersioningBehaviorPinned})
	ar, ok := r.(ActivityRegistry)
	if !ok {
		return nil
	}
	limit := opts.PayloadLimit
	if limit == 0 {
		limit = agentrun.DefaultPayloadLimit
	}
	for _, t := range opts.Tools {
		if t.SubAgent() != nil {
			continue // a child workflow, not an activity
		}
		ar.RegisterActivityWithOptions(activities.LimitResult(t.Spec().Name, limit, t.Activity()), activity.RegisterOptions{Name: t.ActivityName()})
		if check := t.CheckActivity(); check != nil {
			ar.RegisterActivityWithOptions(check, activity.RegisterOptions{Name: protocol.CheckActivityName(t.Spec().Name)})
		}
	}
	var specs []protocol.ToolSpec
	for _, t := range opts.Tools {
		specs = append(specs, t.Spec())
	}
	models := activities.NewModels(opts.Models, specs, opts.Conversation)
	if opts.ConversationCache != nil {
		models.Cache = opts.ConversationCache
	}
	models.PayloadLimit, models.Toolsets = limit, opts.Toolsets
	store := threadStore(opts.Checkpointer)
	models.Store = store
	models.Budgets = opts.ContextTokens
	if len(opts.Toolsets) > 0 {
		ts := activities.Toolsets{Sets: opts.Toolsets, PayloadLimit: limit}
		for _, s := range specs {
			ts.GoTools = append(ts.GoTools, s.Name)
		}
		ar.RegisterActivityWithOptions(ts.List, activity.RegisterOptions{Name: protocol.ListToolsActivity})
		dr, ok := r.(DynamicActivityRegistry)
		if !ok {
			return errors.New("tulip: toolsets need a registry that registers dynamic activities (a worker)")
		}
		dr.RegisterDynamicActivity(ts.Dispatch, activity.DynamicRegisterOptions{})
	}
	ar.RegisterActivityWithOptions(models.Respond, activity.RegisterOptions{Name: protocol.ModelActivity})
	ar.RegisterActivityWithOptions(models.Summarize, activity.RegisterOptions{Name: activities.SummarizeActivity})
	cp := activities.Checkpoints{Checkpointer: opts.Checkpointer, Custom: store != nil || customCheckpointer(opts.Checkpointer), Store: store}
	if cp.Checkpointer == nil {
		cp.Checkpointer = threadstate.TemporalCheckpointer{}
	}
	ar.RegisterActivityWithOptions(cp.Load, activity.RegisterOptions{Name: protocol.LoadCheckpointActivity})
	ar.RegisterActivityWithOptions(cp.Save, activity.RegisterOptions{Name: protocol.SaveCheckpointActivity})
	ar.RegisterActivityWithOptions(cp.LoadThread, activity.RegisterOptions{Name: protocol.LoadThreadActivity})
	ar.RegisterActivityWithOptions(cp.SaveThread, activity.RegisterOptions{Name: protocol.SaveThreadActivity})
	return nil
}

// customCheckpointer: the worker keeps thread states outside Temporal
// only.
func customCheckpointer(c threadstate.Checkpointer) bool {
	switch c.(type) {
	case nil, threadstate.TemporalCheckpointer, *threadstate.TemporalCheckpointer:
		return false
	}
	return true
}

// threadStore is the thread store of c, a TemporalCheckpointer (nil: none).
func threadStore(c threadstate.Checkpointer) threadstate.Checkpointer {
	switch t := c.(type) {
	case threadstate.TemporalCheckpointer:
		return t.Store
	case *threadstate.TemporalCheckpointer:
		if t != nil {
			return t.Store
		}
	}
	return nil
}

// oneLine is err's message: an ApplicationError's own, one line.
func oneLine(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// DefaultStopTimeout is Options.StopTimeout's zero value.
const DefaultStopTimeout = 10 * time.Second

// HeartbeatThrottle is the MaxHeartbeatThrottleInterval the plugin gives a
// worker whose options leave it zero: the heartbeats of the worker's own
// activities (those that call activity.RecordHeartbeat) reach the server
// at least this often. tulip's tool, model and thread activities
// heartbeat through the worker's client instead, each heartbeat with most
// of the heartbeat timeout to be answered; the SDK gives one this long.
const HeartbeatThrottle = time.Second

// NewInterceptor returns the dedup worker interceptor.
func NewInterceptor() sdkinterceptor.WorkerInterceptor { return intercept.New() }

// NewPlugin returns a worker plugin that registers everything on workers and
// on workflow replayers, and installs the dedup interceptor on both.
func NewPlugin(opts Options) (*temporal.SimplePlugin, error) {
	return newPlugin(opts)
}

// newPlugin is NewPlugin with interceptors whose workflow outbound calls
// come before (outside) the dedup interceptor's: they see every tool call,
// served ones too. (The SDK chains outbound interceptors last-listed
// first.)
func newPlugin(opts Options, outer ...sdkinterceptor.WorkerInterceptor) (*temporal.SimplePlugin, error) {
	if _, err := agentrun.New(opts.config()); err != nil {
		return nil, err // validate up front, not at worker start
	}
	// A replayer calls RunContextBefore before every replay, with the same
	// instance key: register once per worker or replayer.
	var mu sync.Mutex
	registered := map[string]bool{}
	return temporal.NewSimplePlugin(temporal.SimplePluginOptions{
		Name:               PluginName,
		WorkerInterceptors: append([]sdkinterceptor.WorkerInterceptor{intercept.New()}, outer...),
		ConfigureClient: func(_ context.Context, o client.PluginConfigureClientOptions) error {
			// Given to the client (client.Options.Plugins), the plugin
			// reaches every worker of that client and sees where its
			// payloads go: with External Storage, no payload limit.
			mu.Lock()
			defer mu.Unlock()
			if opts.PayloadLimit == 0 && len(o.ClientOptions.ExternalStorage.Drivers) > 0 {
				opts.PayloadLimit = -1
			}
			return nil
		},
		ConfigureWorker: func(_ context.Context, o sdkworker.PluginConfigureWorkerOptions) error {
			// Your activities' heartbeats reach the server at least every
			// second: the SDK otherwise holds them back to 80% of the
			// heartbeat timeout, and a heartbeat an overloaded server
			// answers a second late then times the attempt out.
			if o.WorkerOptions.MaxHeartbeatThrottleInterval == 0 {
				o.WorkerOptions.MaxHeartbeatThrottleInterval = HeartbeatThrottle
			}
			// A stopping worker lets in-flight tool and model calls finish.
			if o.WorkerOptions.WorkerStopTimeout == 0 {
				o.WorkerOptions.WorkerStopTimeout = DefaultStopTimeout
				if opts.StopTimeout > 0 {
					o.WorkerOptions.WorkerStopTimeout = opts.StopTimeout
				}
			}
			return nil
		},
		RunContextBefore: func(ctx context.Context, o temporal.SimplePluginRunContextBeforeOptions) error {
			if o.Registry == nil {
				return errors.New("tulip: plugin has no registry")
			}
			mu.Lock()
			defer mu.Unlock()
			if registered[o.InstanceKey] {
				return nil
			}
			registered[o.InstanceKey] = true
			if err := Register(o.Registry, opts); err != nil {
				return fmt.Errorf("tulip: %w", err)
			}
			if !o.WorkflowReplayer && len(opts.Toolsets) > 0 {
				// A worker whose toolsets clash does not start.
				ts := activities.Toolsets{Sets: opts.Toolsets}
				for _, t := range opts.Tools {
					ts.GoTools = append(ts.GoTools, t.Spec().Name)
				}
				if _, err := ts.List(ctx); err != nil {
					return fmt.Errorf("tulip: %s", oneLine(err))
				}
			}
			return nil
		},
	})
}
