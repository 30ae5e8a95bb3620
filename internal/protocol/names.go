package protocol

// Stable activity names. Changing one breaks the replay of every history
// recorded with it.
const (
	// ModelActivity calls the run's model for its next response.
	ModelActivity = "tulip.Model"
	// LoadCheckpointActivity loads a thread's checkpoint at run start (runs
	// recorded before LoadThreadActivity).
	LoadCheckpointActivity = "tulip.LoadCheckpoint"
	// SaveCheckpointActivity saves a thread's checkpoint at run end, when
	// the worker has a custom Checkpointer (runs recorded before
	// SaveThreadActivity).
	SaveCheckpointActivity = "tulip.SaveCheckpoint"
	// LoadThreadActivity loads a thread's state at run start
	// (LoadedThread), by reference.
	LoadThreadActivity = "tulip.LoadThread"
	// SaveThreadActivity saves a run's thread state in full through a
	// custom Checkpointer, at run end.
	SaveThreadActivity = "tulip.SaveThread"
	// ListToolsActivity lists the worker's toolsets' tools, once per run.
	ListToolsActivity = "tulip.ListTools"
	// ToolActivityPrefix prefixes a tool's name to make its activity name.
	ToolActivityPrefix = "tulip.tool."
)

// Stable query names the activities use on agent runs (the workflow
// package registers them).
const (
	// QueryThread returns the thread state a run would leave behind if it
	// closed now (Checkpoint): the conversation and every agent's log,
	// pending records left out. It answers on closed runs too: the worker
	// replays the run's history to answer it, whatever way the run closed.
	QueryThread = "tulip.thread"
	// QueryConversation pages the run's conversation (ConversationPage):
	// the model activity reads it on a cache miss.
	QueryConversation = "tulip.conversation"
)

// ToolActivityName is the activity name of the tool named tool.
func ToolActivityName(tool string) string { return ToolActivityPrefix + tool }

// CheckActivityName is the activity name of the check of the tool named
// tool (ToolOptions.Check).
func CheckActivityName(tool string) string { return CheckActivityPrefix + tool }

// CheckActivityPrefix prefixes a tool's name to make its check's activity
// name.
const CheckActivityPrefix = "tulip.check."

// Metric names of the activities, emitted through the SDK's metrics
// handler (the workflow's are in package workflow).
const (
	// MetricToolLatency times one attempt of a tool body; tags tool,
	// outcome (ok, error).
	MetricToolLatency = "tulip_tool_latency"
	// MetricModelLatency times one attempt of a model call; tags model,
	// outcome.
	MetricModelLatency = "tulip_model_latency"
	// MetricModelTokens counts the tokens a model reports; tags model, kind
	// (prompt, completion).
	MetricModelTokens = "tulip_model_tokens"
)

// Stable temporal.ApplicationError types raised by tulip. Deterministic
// failures are non-retryable.
const (
	// ErrArgumentDecode: a tool's argument text does not decode into the
	// body's argument type. Non-retryable.
	ErrArgumentDecode = "tulip.ArgumentDecode"
	// ErrResultEncode: a tool's result cannot be encoded as JSON.
	// Non-retryable.
	ErrResultEncode = "tulip.ResultEncode"
	// ErrUnknownModel: the run names a model the worker does not have.
	// Non-retryable.
	ErrUnknownModel = "tulip.UnknownModel"
	// ErrCheckpoint: a thread checkpoint cannot be read or written.
	ErrCheckpoint = "tulip.Checkpoint"
	// ErrMaxTurns: the run reached its turn limit. Non-retryable; the
	// failure's details hold the run's result (trace and checkpoint).
	ErrMaxTurns = "tulip.MaxTurnsExceeded"
	// ErrNotInterrupted: a resume arrived while the run was not interrupted.
	ErrNotInterrupted = "tulip.NotInterrupted"
	// ErrStaleInterrupt: a resume names an interrupt that is not the
	// current one and was never answered.
	ErrStaleInterrupt = "tulip.StaleInterrupt"
	// ErrUnknownHook: a hook name the worker does not have.
	ErrUnknownHook = "tulip.UnknownHook"
	// ErrBadInput: the run's input is invalid. Non-retryable.
	ErrBadInput = "tulip.BadInput"
	// ErrToolFailed: a tool's failure that was not an ApplicationError.
	ErrToolFailed = "tulip.ToolFailed"
	// ErrPayloadTooLarge: a payload the run must write (its result, its
	// continue-as-new state) is over the server's payload limit and no
	// external storage is configured. Non-retryable; the thread keeps
	// every record (the next run rebuilds them from this run's history).
	ErrPayloadTooLarge = "tulip.PayloadTooLarge"
	// ErrConversation: the model activity cannot rebuild the conversation
	// the workflow holds (its digest differs). Non-retryable.
	ErrConversation = "tulip.ConversationMismatch"
	// ErrRunFailed: the run failed for a reason that has no tulip type of
	// its own (a model activity that ran out of retries, say).
	ErrRunFailed = "tulip.RunFailed"
	// ErrClientTool: the recorded error of a call whose result a resume
	// gave marked as an error (agentrun.ToolResult.IsError): a client
	// tool's, or a held unknown outcome's.
	ErrClientTool = "tulip.ClientToolError"
	// ErrPluginMissing: the workflow runs on a worker without tulip's
	// interceptor (registered without the plugin), which would run its
	// calls without dedup. Non-retryable.
	ErrPluginMissing = "tulip.PluginMissing"
	// ErrAmbiguous: a tool body's error after which the effect may have
	// happened (a timeout after the request went out). With
	// ToolSpec.OnUnknown set, the call's outcome is unknown, and the run
	// checks; otherwise it is an error like any other.
	ErrAmbiguous = "tulip.Ambiguous"
	// ErrOutcomeUnknown: a call's outcome stayed unknown: its checks
	// failed, or its attempts ran out with each one lost. Non-retryable.
	ErrOutcomeUnknown = "tulip.OutcomeUnknown"
)
