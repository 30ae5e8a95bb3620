// Package witness is what the demo services record of every request they
// receive: the tool and call that sent it, its downstream key, the agent run
// and the activity attempt. A tool body sends them as headers
// (SetHeaders); a service reads them back (FromRequest) into its Log. A
// checker (tulip soak's) compares a service's log with the calls a run
// made: a call served from the execution log must reach no service, an
// executed one exactly once, more only as a retry with the same key.
package witness

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/tulip-temporal/tulip/internal/activities"
)

// Headers a tool body sends beside activities.IdempotencyKeyHeader.
const (
	HeaderTool     = "Tulip-Tool"
	HeaderCall     = "Tulip-Call"
	HeaderWorkflow = "Tulip-Workflow"
	HeaderRun      = "Tulip-Run"
	HeaderAttempt  = "Tulip-Attempt"
)

// Request is one request a service received.
type Request struct {
	// Service is the service that received it ("billing", "pager").
	Service string `json:"service"`
	// Tool and Call are the tool and the model's call id that sent it.
	Tool string `json:"tool"`
	Call string `json:"call"`
	// Key is its Idempotency-Key.
	Key string `json:"key"`
	// Workflow and Run are the agent run's workflow and run ids.
	Workflow string `json:"workflow,omitempty"`
	Run      string `json:"run"`
	// Attempt is the activity attempt (from 1); 0 when the sender was not
	// an activity.
	Attempt int `json:"attempt"`
	// At is when the service received it.
	At time.Time `json:"at"`
}

// ErrNoCall is returned by SetHeaders outside a tool body.
var ErrNoCall = errors.New("witness: not inside a tool body: no call to name")

// SetHeaders names the tool execution running in ctx on req: its
// Idempotency-Key, tool, call id, and, in an activity, its workflow, run and
// attempt.
func SetHeaders(ctx context.Context, req *http.Request) error {
	in, ok := activities.CallInfo(ctx)
	if !ok {
		return ErrNoCall
	}
	w := Request{Tool: in.Tool, Call: in.CallID, Key: in.IdempotencyKey}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		w.Workflow, w.Run, w.Attempt = info.WorkflowExecution.ID, info.WorkflowExecution.RunID, int(info.Attempt)
	}
	if err := activities.SetIdempotencyKeyHeader(ctx, req); err != nil {
		return err
	}
	Set(req, w)
	return nil
}

// Set writes w's fields (but Service and At) as req's headers.
func Set(req *http.Request, w Request) {
	h := req.Header
	if w.Key != "" {
		h.Set(activities.IdempotencyKeyHeader, w.Key)
	}
	h.Set(HeaderTool, w.Tool)
	h.Set(HeaderCall, w.Call)
	h.Set(HeaderWorkflow, w.Workflow)
	h.Set(HeaderRun, w.Run)
	h.Set(HeaderAttempt, strconv.Itoa(w.Attempt))
}

// FromRequest reads what r names, as service received it now.
func FromRequest(service string, r *http.Request) Request {
	h := r.Header
	attempt, _ := strconv.Atoi(h.Get(HeaderAttempt))
	return Request{Service: service, Tool: h.Get(HeaderTool), Call: h.Get(HeaderCall), Key: h.Get(activities.IdempotencyKeyHeader),
		Workflow: h.Get(HeaderWorkflow), Run: h.Get(HeaderRun), Attempt: attempt, At: time.Now()}
}

// Log is a service's record of the requests it received, in order. The
// zero value is ready; it is safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	reqs []Request
}

// Add records r.
func (l *Log) Add(r Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

// Requests returns the requests recorded, in order.
func (l *Log) Requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.reqs...)
}

// Len is how many requests were recorded.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}
