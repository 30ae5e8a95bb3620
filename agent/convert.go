package agent

import (
	"encoding/json"
	"errors"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// The package's types are its own (go doc shows their fields); the
// internal client's carry the same JSON, so a value crosses by its JSON:
// the wire form both sides already agree on (docs/protocol.md).
func recode[T any](from any) (T, error) {
	var to T
	b, err := json.Marshal(from)
	if err != nil {
		return to, err
	}
	return to, json.Unmarshal(b, &to)
}

// result is res as this package's Result (nil for nil).
func result(res *agentrun.RunResult) (*Result, error) {
	if res == nil {
		return nil, nil
	}
	out, err := recode[Result](res)
	return &out, err
}

// publicError is err with the internal client's typed errors as this
// package's.
func publicError(err error) error {
	var busy *runclient.ThreadBusyError
	var closed *runclient.NotInterruptedError
	var failed *runclient.RunFailedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &busy):
		return &ThreadBusyError{ThreadID: busy.ThreadID, RunID: busy.RunID}
	case errors.As(err, &closed):
		return &NotInterruptedError{WorkflowID: closed.WorkflowID}
	case errors.As(err, &failed):
		res, rerr := result(failed.Result)
		if rerr != nil {
			return rerr
		}
		return &RunFailedError{Result: res, Err: failed.Err, msg: failed.Error()}
	}
	return err
}

func (e *ThreadBusyError) err() error {
	return &runclient.ThreadBusyError{ThreadID: e.ThreadID, RunID: e.RunID}
}

func (e *NotInterruptedError) err() error {
	return &runclient.NotInterruptedError{WorkflowID: e.WorkflowID}
}
