package tulip

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// Options configure tulip on a worker. The zero value runs agents with no
// tools, hooks or models.
type Options struct {
	// Tools the agents may call: Go tools (NewTool) and toolsets (an MCP
	// server, your own) alike. A tool name must be unique across them.
	// Zero value: none.
	Tools []Toolset
	// Hooks by name, for agent.Options.Hooks and mid-run installs. Zero
	// value: none (the approval hook, tulip.approval, is always there).
	Hooks map[string]Hook
	// Models by name, for agent.Options.Model. Zero value: none.
	Models map[string]Model
	// ThreadStore keeps threads past the retention of the runs that made
	// them (docs/threads.md). Zero value (nil): threads live in Temporal's
	// history only, and a run whose thread's runs were deleted fails with
	// kind ThreadLost instead of starting empty.
	ThreadStore ThreadStore
	// Conversation chooses what a model is shown of the thread's
	// conversation (LastTurns, say). It never changes what the log holds
	// or how calls match. Zero value: everything.
	Conversation ConversationPolicy
	// ConversationCacheBytes bounds the model activity's cache of
	// conversations, shared by the worker's runs (a conversation it no
	// longer holds is read from its run's history). Zero value: 64 MiB.
	ConversationCacheBytes int64
	// PayloadLimit is the largest payload a run, a model response or a
	// tool result may be (kind PayloadTooLarge beyond it, before anything
	// is lost). Zero value: a little under Temporal's 2 MiB, or no limit
	// when the plugin is given to a client that stores large payloads
	// externally (package blobstore). -1: no limit.
	PayloadLimit int
	// ModelHeartbeatTimeout is how long a model call may go without a
	// heartbeat (tulip sends them while the model answers) before Temporal
	// retries it, on another worker when this one died. Zero value: 5 s.
	// Negative: none.
	ModelHeartbeatTimeout time.Duration
	// ModelTimeout bounds one attempt of a model call: a long answer may
	// stream for this long (a dead worker is found by the heartbeat, a
	// stalled model by its adapter's idle timeout, such as
	// openaimodel.Options.IdleTimeout). Zero value: 10 minutes.
	ModelTimeout time.Duration
	// ContextTokens are, per model name (Models' keys), the most input
	// tokens one model call may send. Past 80% of it the run compacts
	// its model's view of the conversation (docs/context.md). Zero value:
	// a model that reports its window (ContextWindow() int, as
	// openaimodel's known models do) gets that window less 8,192 tokens
	// for the answer; any other model has no budget and is sent the whole
	// conversation.
	ContextTokens map[string]int
	// StopTimeout is how long a stopping worker lets in-flight tool and
	// model calls finish before it cancels them. Zero value: 10 s, unless
	// the worker's own WorkerStopTimeout is set.
	StopTimeout time.Duration
	// Observer receives each call decision and model call once, never
	// during replay (module github.com/tulip-temporal/tulip/otel has an
	// OpenTelemetry one). Metrics go to the client's MetricsHandler either
	// way. Zero value: none.
	Observer Observer
	// MetricAgents lists the agent names that tag the worker's metrics;
	// other agents are tagged "other", so a client's string never makes a
	// new series. Zero value: the first 100 distinct agents, then "other".
	MetricAgents []string
}

// NewPlugin returns the worker plugin: give it to worker.Options.Plugins
// (or client.Options.Plugins, to reach every worker of the client and see
// where its payloads go). It registers the agent-run workflow and tulip's
// activities, installs the workflow interceptor that routes tool calls
// through the execution log, and refuses options that cannot work (a tool
// name twice, a hook without a name) here rather than at a run.
func NewPlugin(opts Options) (*temporal.SimplePlugin, error) {
	if err := opts.checkNil(); err != nil {
		return nil, err
	}
	return workerplugin.NewPlugin(opts.internal())
}

// nilOptionError is an interface option holding a typed nil (a nil
// pointer in an Observer, say): refused once, when the plugin is made,
// rather than panicking in workflow code on every call.
type nilOptionError struct{ option string }

func (e *nilOptionError) Error() string {
	return "tulip: Options." + e.option + " holds a typed nil (a nil pointer in an interface): leave it unset instead"
}

// Kind is tulip.BadInput.
func (e *nilOptionError) Kind() ErrorKind { return BadInput }

// checkNil refuses a typed nil in any interface option.
func (o Options) checkNil() error {
	if typedNil(o.Observer) {
		return &nilOptionError{"Observer"}
	}
	if typedNil(o.ThreadStore) {
		return &nilOptionError{"ThreadStore"}
	}
	for i, t := range o.Tools {
		if t == nil || typedNil(t) {
			return &nilOptionError{fmt.Sprintf("Tools[%d]", i)}
		}
		if tool, ok := t.(*Tool); ok && tool.t == nil {
			return &nilOptionError{fmt.Sprintf("Tools[%d] (a zero Tool: make one with NewTool)", i)}
		}
	}
	for name, h := range o.Hooks {
		if typedNil(h) {
			return &nilOptionError{fmt.Sprintf("Hooks[%q]", name)}
		}
	}
	for name, m := range o.Models {
		if typedNil(m) {
			return &nilOptionError{fmt.Sprintf("Models[%q]", name)}
		}
	}
	return nil
}

// typedNil: v is a non-nil interface whose value is a nil pointer, map,
// slice, func or channel.
func typedNil(v any) bool {
	if v == nil {
		return false
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// ReplayOptions configure ReplayHistories: your workers' codec keys and
// blob store, your replayer's own options. The zero value replays with a
// plain replayer and no logs.
type ReplayOptions struct {
	// Replayer are the replayer's options (your own interceptors, a data
	// converter); tulip's plugin is added to them, and Keys and Blobs fill
	// the converters and External Storage they leave unset.
	Replayer worker.WorkflowReplayerOptions
	// Logger receives the SDK's replay logs (a nondeterminism failure's
	// stack trace among them). Zero value: none.
	Logger log.Logger
	// Keys decrypt the histories: your workers' keys (codec.LoadKeyFile).
	// A history exported decrypted still needs them when it holds blob
	// references: the blobs stay ciphertext. Zero value: none; a payload
	// encrypted with a key is then named (a *codec.KeyError), not
	// replayed.
	Keys *codec.Keyring
	// Blobs is the store your clients and workers keep large payloads in
	// (blobstore.ExternalStorage). Zero value: none; a history that holds
	// blob references then fails before any replay, naming the option.
	Blobs blobstore.Store
}

// ReplayHistories replays JSON history files (as 'tulip history' or
// 'temporal workflow show --output json' write them) with tulip installed
// as opts configures it. It returns nil when every file replays, or one
// *ReplayError per file that does not, joined: one line each, naming the
// event, the tool and the likely cause. Run it in a test, so that a change
// to your tools, hooks or tulip that would break running workflows fails
// before it ships (docs/replay.md).
func ReplayHistories(opts Options, ro ReplayOptions, files ...string) error {
	err := workerplugin.ReplayHistories(opts.internal(), workerplugin.ReplayOptions(ro), files...)
	if err == nil {
		return nil
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
		var re *workerplugin.ReplayError
		if errors.As(e, &re) {
			out[i] = &ReplayError{File: re.File, Explained: re.Explained, Err: re.Err, msg: re.Error()}
		}
	}
	return errors.Join(out...)
}

// ReplayError is a history that does not replay. Error is one line: for a
// nondeterminism in a tool call, it names the event, the tool and the
// call, and the likely cause.
type ReplayError struct {
	// File is the history file.
	File string
	// Explained says what differs, when tulip can tell ("" otherwise).
	Explained string
	// Err is the SDK's error.
	Err error
	msg string
}

func (e *ReplayError) Error() string { return e.msg }

// Unwrap is Err.
func (e *ReplayError) Unwrap() error { return e.Err }

// internal is the worker's options: Go tools and toolsets apart.
func (o Options) internal() workerplugin.Options {
	w := workerplugin.Options{Hooks: internalHooks(o.Hooks), Models: workerplugin.PublicModels(o.Models), Conversation: policy(o.Conversation),
		PayloadLimit: o.PayloadLimit, ModelHeartbeatTimeout: o.ModelHeartbeatTimeout, ModelTimeout: o.ModelTimeout, StopTimeout: o.StopTimeout,
		MetricAgents: o.MetricAgents, ContextTokens: contextTokens(o.Models, o.ContextTokens)}
	if o.Observer != nil {
		w.Observer = observer{o.Observer}
	}
	for _, t := range o.Tools {
		if tool, ok := t.(*Tool); ok {
			w.Tools = append(w.Tools, tool.t)
		} else {
			w.Toolsets = append(w.Toolsets, activities.PublicToolset(t))
		}
	}
	if o.ThreadStore != nil {
		w.Checkpointer = threadstate.TemporalCheckpointer{Store: store{o.ThreadStore}}
	}
	if o.ConversationCacheBytes > 0 {
		w.ConversationCache = activities.NewConversationCacheBytes(activities.DefaultCacheNodes, o.ConversationCacheBytes)
	}
	return w
}

// answerRoom is what a default budget leaves of a model's window for its
// answer.
const answerRoom = 8192

// contextTokens is each model's budget: set, or its reported window less
// the answer's room.
func contextTokens(models map[string]Model, set map[string]int) map[string]int {
	out := map[string]int{}
	for name, m := range models {
		if n := set[name]; n > 0 {
			out[name] = n
		} else if w, ok := m.(interface{ ContextWindow() int }); ok && w.ContextWindow() > 0 {
			out[name] = max(w.ContextWindow()-answerRoom, w.ContextWindow()/2)
		}
	}
	return out
}
