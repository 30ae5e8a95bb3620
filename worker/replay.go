package worker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
)

// ReplayOptions configure ReplayHistories. The zero value replays with a
// plain replayer and no logs.
type ReplayOptions struct {
	// Replayer are the replayer's options (a data converter, External
	// Storage, your own interceptors); tulip's plugin is added to them.
	Replayer sdkworker.WorkflowReplayerOptions
	// Logger receives the SDK's replay logs (a nondeterminism failure's
	// stack trace among them). Zero value: none.
	Logger sdklog.Logger
}

// ReplayError is a history that does not replay: the file, and the SDK's
// error. Error is one line.
type ReplayError struct {
	File string
	Err  error
}

func (e *ReplayError) Error() string {
	msg, _, _ := strings.Cut(e.Err.Error(), "\n")
	return fmt.Sprintf("%s: replay failed: %s", e.File, msg)
}

func (e *ReplayError) Unwrap() error { return e.Err }

// ReplayHistories replays JSON history files (as 'tulip history' or
// 'temporal workflow show --output json' write them) with tulip installed
// as opts configure it: give it the tools and hooks your workers have. It
// returns nil when every file replays, or the *ReplayError of each that does
// not, joined. Use it in a test so that a change to your tools, hooks or
// tulip itself that would break running workflows fails before it ships:
//
//	files, _ := filepath.Glob("testdata/histories/*.json")
//	if err := tworker.ReplayHistories(tworker.Options{Tools: tools, Hooks: hooks}, tworker.ReplayOptions{}, files...); err != nil {
//		t.Fatal(err)
//	}
func ReplayHistories(opts Options, ro ReplayOptions, files ...string) error {
	plugin, err := NewPlugin(opts)
	if err != nil {
		return err
	}
	ropts := ro.Replayer
	ropts.Plugins = append(append([]sdkworker.Plugin(nil), ropts.Plugins...), plugin)
	r, err := sdkworker.NewWorkflowReplayerWithOptions(ropts)
	if err != nil {
		return err
	}
	logger := ro.Logger
	if logger == nil {
		logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	var errs []error
	for _, f := range files {
		if err := r.ReplayWorkflowHistoryFromJSONFile(logger, f); err != nil {
			errs = append(errs, &ReplayError{File: f, Err: err})
		}
	}
	return errors.Join(errs...)
}
