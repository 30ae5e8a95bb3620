package agentrun

import (
	"errors"
	"testing"

	"github.com/tulip-temporal/tulip/internal/protocol"

	"go.temporal.io/sdk/temporal"
)

// FuzzStrictInputs: any bytes sent as a run input, a resume or a hooks
// input are decoded or refused with tulip.BadInput (non-retryable); never a
// panic, never an unknown field let through.
func FuzzStrictInputs(f *testing.F) {
	for _, seed := range []string{
		`{"model": "m", "thread_id": "t", "message": "hi", "max_turns": 3, "limits": {"MaxDepth": 2}}`,
		`{"threadId": "t", "model": "m"}`, `{"interrupt_id": "int-1", "answer": "ok", "perform_dangling": true}`,
		`{"install": ["h"], "remove": []}`, `{"installHooks": ["h"]}`, `null`, ``, `[]`, `{"model": 1}`,
		`{"limits": {"MaxDepth": 1, "Bogus": 2}, "model": "m"}`, `{"continued": {"segments": 2}, "model": "m"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(what string, v any) {
			err := decodeStrict(what, data, v)
			if err == nil {
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != protocol.ErrBadInput || !app.NonRetryable() {
				t.Fatalf("%s: %v is not a non-retryable %s", what, err, protocol.ErrBadInput)
			}
		}
		check("run input", &RunInput{})
		check("resume input", &ResumeInput{})
		check("hooks input", &HooksInput{})
	})
}
