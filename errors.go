package tulip

import (
	"errors"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/codec"
)

// ErrorKind is the stable kind of a tulip failure. On the wire it is the
// type of a Temporal ApplicationError (docs/protocol.md lists them), so a
// client in any language reads the same kind; in Go, KindOf and Is read it
// from any error tulip, the SDK or package agent returns. Deterministic
// failures (bad input, a lost thread, a turn limit) are non-retryable.
type ErrorKind string

// The kinds.
const (
	// BadInput: the run's input or a resume is invalid.
	BadInput ErrorKind = "tulip.BadInput"
	// ArgumentDecode: a tool's argument text does not decode into its Go
	// argument type.
	ArgumentDecode ErrorKind = "tulip.ArgumentDecode"
	// ResultEncode: a tool's result cannot be encoded as JSON.
	ResultEncode ErrorKind = "tulip.ResultEncode"
	// UnknownModel: the run names a model the worker does not have.
	UnknownModel ErrorKind = "tulip.UnknownModel"
	// UnknownHook: the run names a hook the worker does not have.
	UnknownHook ErrorKind = "tulip.UnknownHook"
	// ToolClash: two tools (Go tools or toolsets' tools) share a name.
	ToolClash ErrorKind = "tulip.ToolClash"
	// ToolFailed: a tool failed with an error that had no type of its own.
	ToolFailed ErrorKind = "tulip.ToolFailed"
	// ToolTimeout: a tool call ran out of time (its recorded outcome).
	ToolTimeout ErrorKind = "tulip.Timeout"
	// Cancelled: a call was cancelled (by a hook, or as its activity was);
	// the wire's older spelling tulip.Canceled reads as Cancelled too.
	Cancelled ErrorKind = "tulip.Cancelled"
	// MaxTurnsExceeded: the run reached its turn limit.
	MaxTurnsExceeded ErrorKind = "tulip.MaxTurnsExceeded"
	// PayloadTooLarge: a payload the run must write is over the limit and
	// no external storage is configured; nothing is lost.
	PayloadTooLarge ErrorKind = "tulip.PayloadTooLarge"
	// ConversationMismatch: the model activity cannot rebuild the
	// conversation the run holds.
	ConversationMismatch ErrorKind = "tulip.ConversationMismatch"
	// CheckpointFailed: a thread's state cannot be read or written.
	CheckpointFailed ErrorKind = "tulip.Checkpoint"
	// ThreadLost: a run the thread needs was deleted (a namespace's
	// retention) and no ThreadStore holds its part.
	ThreadLost ErrorKind = "tulip.ThreadLost"
	// ThreadBusy: a run is already open on the thread.
	ThreadBusy ErrorKind = "tulip.ThreadBusy"
	// NotInterrupted: a resume arrived for a run that is not interrupted.
	NotInterrupted ErrorKind = "tulip.NotInterrupted"
	// StaleInterrupt: a resume names an interrupt that is not the current
	// one.
	StaleInterrupt ErrorKind = "tulip.StaleInterrupt"
	// CodecKey: a payload is encrypted with a key this process lacks.
	CodecKey ErrorKind = "tulip.CodecKey"
	// PluginMissing: a worker ran the agent-run workflow without tulip's
	// interceptor (registered without NewPlugin); the run fails rather
	// than run its calls without dedup.
	PluginMissing ErrorKind = "tulip.PluginMissing"
	// RunFailed: the run failed for a reason with no kind of its own (a
	// model call out of retries, say).
	RunFailed ErrorKind = "tulip.RunFailed"
	// Ambiguous: a tool body's error after which the effect may have
	// happened (a timeout after the request went out): return
	// ToolError(msg, Ambiguous, false). With ToolSpec.OnUnknown
	// "check" the call's outcome is unknown and the run checks; otherwise
	// it is an error like any other.
	Ambiguous ErrorKind = "tulip.Ambiguous"
	// OutcomeUnknown: a call's outcome stayed unknown (its check failed,
	// or every attempt was lost); the model is told so.
	OutcomeUnknown ErrorKind = "tulip.OutcomeUnknown"
	// ContextTooLong: a model call would send more than the model takes
	// (its context budget, or the provider said so: OpenAI's
	// context_length_exceeded). The run compacts its model's view and asks
	// again, once, before it fails with this kind (docs/context.md).
	ContextTooLong ErrorKind = "tulip.ContextTooLong"
	// NotFound: the thread, run or workflow a call names does not exist
	// on the server (never started, or deleted by retention).
	NotFound ErrorKind = "tulip.NotFound"
	// Nondeterminism: the run's workflow task fails because the workers
	// polling it run code that does not replay its history (a change
	// deployed under an open run without Worker Deployment Versioning).
	// Waiting for the run returns this kind as soon as the server reports
	// the failed task; the run itself waits, nothing lost, for workers that
	// can replay it (docs/deploy.md).
	Nondeterminism ErrorKind = "tulip.Nondeterminism"
)

// KindOf returns the tulip kind of err, or "" when err is not a tulip
// failure (or is nil). It looks through wrapping: a failed run's error,
// an activity or update error from the SDK, a codec error.
func KindOf(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var k interface{ Kind() ErrorKind }
	if errors.As(err, &k) {
		return k.Kind()
	}
	var key *codec.KeyError
	if errors.As(err, &key) {
		return CodecKey
	}
	var missing *serviceerror.NotFound
	if errors.As(err, &missing) {
		return NotFound
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && strings.HasPrefix(app.Type(), "tulip.") {
		if app.Type() == "tulip.Canceled" {
			return Cancelled
		}
		return ErrorKind(app.Type())
	}
	return ""
}

// Is reports whether err is a tulip failure of kind.
//
//	if tulip.Is(err, tulip.ThreadLost) { ... }
func Is(err error, kind ErrorKind) bool { return kind != "" && KindOf(err) == kind }
