package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/runclient"
)

// bank is a payment service on loopback that does not honour idempotency
// keys (every POST /charge charges), and answers GET /charges?key=K with
// the charge that key made, if any: what a check asks. Its charges are
// the witness.
type bank struct {
	*httptest.Server
	mu      sync.Mutex
	charges []string          // order of each charge made
	byKey   map[string]string // key -> charge id (the last)
}

func newBank(t *testing.T) *bank {
	b := &bank{byKey: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charge", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Order string `json:"order"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.charges = append(b.charges, req.Order)
		id := fmt.Sprintf("ch-%d", len(b.charges))
		b.byKey[r.Header.Get("Idempotency-Key")] = id
		b.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"charge_id": id})
	})
	mux.HandleFunc("GET /charges", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		id, ok := b.byKey[r.URL.Query().Get("key")]
		b.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"charge_id": id})
	})
	b.Server = httptest.NewServer(mux)
	t.Cleanup(b.Close)
	return b
}

// count is how many times the bank charged order.
func (b *bank) count(order string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, o := range b.charges {
		if o == order {
			n++
		}
	}
	return n
}

func (b *bank) charge(ctx context.Context, order string) (map[string]string, error) {
	body, _ := json.Marshal(map[string]string{"order": order})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.URL+"/charge", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if err := tulip.SetIdempotencyKeyHeader(ctx, req); err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]string
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// lookup is the check: the charge the key made, if the bank has one.
func (b *bank) lookup(ctx context.Context, key string) (json.RawMessage, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL+"/charges?key="+key, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, false, nil
	}
	var out json.RawMessage
	return out, true, json.NewDecoder(resp.Body).Decode(&out)
}

// unknownCase is a charge whose first attempt goes wrong (fault) with
// its tool's OnUnknown set or not.
type unknownCase struct {
	name, onUnknown, fault string
	checkFails             bool
	twin                   bool // idempotent, and called twice in one response
	// again: idempotent, and called again, identically, in the next
	// response (after the hold is answered: served from the log).
	again bool
	// resume answers the interrupt of a tool that holds (id: the
	// interrupt's).
	resume     func(id string) agent.ResumeInput
	charges    int
	resolution string
	// attempts is the tool's MaximumAttempts (zero: 3).
	attempts int32
}

var unknownCases = []unknownCase{
	// The worker lost after the charge: the attempt outlives its
	// start-to-close timeout, as a dead worker's does.
	{name: "lost-check", onUnknown: "check", fault: "lost", charges: 1, resolution: "applied"},
	{name: "lost-retry", fault: "lost", charges: 2},
	// The bank's reply timed out after the charge: an Ambiguous error.
	{name: "ambiguous-check", onUnknown: "check", fault: "ambiguous", charges: 1, resolution: "applied"},
	{name: "ambiguous-retry", fault: "ambiguous", charges: 2},
	// The request never reached the bank: the check finds nothing and the
	// call runs again, with the same key.
	{name: "before-check", onUnknown: "check", fault: "before", charges: 1, resolution: "retried"},
	// The check itself fails: the outcome stays unknown, in one line.
	{name: "check-fails", onUnknown: "check", fault: "ambiguous", checkFails: true, charges: 1, resolution: "unresolved"},
	// An idempotent tool's twin in the same response, served while the
	// first call's outcome is being resolved, is served the resolved
	// outcome, not the lost attempt's error.
	{name: "twin-check", onUnknown: "check", fault: "lost", twin: true, charges: 1, resolution: "applied"},
	// Holding: the run waits for a person. One looks at the bank and says
	// what happened (a result); one, the request having never gone out,
	// approves a run with the same key; one declines (the call stays
	// unknown, with the person's words).
	{name: "lost-hold-answer", onUnknown: "hold", fault: "lost", charges: 1, resolution: "answered",
		resume: func(id string) agent.ResumeInput {
			return agent.ClientResults(id, agent.ToolResult{CallID: "c1", Output: `{"charge_id":"ch-1"}`})
		}},
	{name: "before-hold-approve", onUnknown: "hold", fault: "before", charges: 1, resolution: "retried", resume: agent.Approve},
	{name: "ambiguous-hold-decline", onUnknown: "hold", fault: "ambiguous", charges: 1, resolution: "unresolved",
		resume: func(id string) agent.ResumeInput { return agent.Decline(id, "finance will reconcile it by hand") }},
	// The person's answer is about that call: the run goes on matching,
	// and the identical charge of the next response is served from the
	// record the answer made (not charged again at a bank that ignores
	// the key).
	{name: "lost-hold-answer-again", onUnknown: "hold", fault: "lost", again: true, charges: 1, resolution: "answered",
		resume: func(id string) agent.ResumeInput {
			return agent.ClientResults(id, agent.ToolResult{CallID: "c1", Output: `{"charge_id":"ch-1"}`})
		}},
	// One execution allowed: the hold offers no re-run, and refuses one.
	{name: "ambiguous-hold-used", onUnknown: "hold", fault: "ambiguous", charges: 1, resolution: "answered", attempts: 1,
		resume: func(id string) agent.ResumeInput {
			return agent.ClientResults(id, agent.ToolResult{CallID: "c1", Output: `{"charge_id":"ch-1"}`})
		}},
}

// unknownHistories holds a recorded run of each case whose tool checks
// (TULIP_RECORD_HISTORIES=1 re-records them): changes to workflow code
// must keep them replaying.
const unknownHistories = "testdata/unknown"

// options are the case's worker options: the charge tool over bk (keys
// collects the key of every attempt of its body) and model "m", which
// charges the case's order once (twice, for a twin) and ends.
func (tc unknownCase) options(t *testing.T, bk *bank, keys *[]string) tulip.Options {
	var mu sync.Mutex
	attempts := map[string]int{} // key -> attempts of the body
	spec := tulip.ToolSpec{Name: "charge", OnUnknown: tc.onUnknown, Idempotent: tc.twin || tc.again}
	maxAttempts := tc.attempts
	if maxAttempts == 0 {
		maxAttempts = 3
	}
	opts := tulip.ToolOptions{StartToCloseTimeout: 2 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: maxAttempts}}
	if tc.onUnknown == "check" {
		opts.Check = func(ctx context.Context, in tulip.ToolInput) (json.RawMessage, bool, error) {
			if tc.checkFails {
				return nil, false, tulip.ToolError("the bank's lookup is down", "bank.Down", true)
			}
			return bk.lookup(ctx, in.IdempotencyKey)
		}
	}
	tool, err := tulip.NewTool(spec, func(ctx context.Context, args struct {
		Order string `json:"order"`
	}) (map[string]string, error) {
		key := tulip.IdempotencyKey(ctx)
		mu.Lock()
		attempts[key]++
		first := attempts[key] == 1
		*keys = append(*keys, key)
		mu.Unlock()
		if first && tc.fault == "before" {
			return nil, tulip.ToolError("connection reset before the request was sent", tulip.Ambiguous, false)
		}
		out, err := bk.charge(ctx, args.Order)
		if err != nil || !first {
			return out, err
		}
		switch tc.fault {
		case "lost":
			<-ctx.Done() // the charge is made; the worker is never heard from again
			return nil, ctx.Err()
		case "ambiguous":
			return nil, tulip.ToolError("the bank's reply timed out", tulip.Ambiguous, false)
		}
		return out, nil
	}, opts)
	require.NoError(t, err)
	order := tc.order()
	model := tulip.ModelFunc(func(_ context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		if req.Turn == 1 {
			calls := []tulip.ToolCall{{ID: "c1", Name: "charge", Arguments: `{"order":"` + order + `"}`}}
			if tc.twin {
				calls = append(calls, tulip.ToolCall{ID: "c2", Name: "charge", Arguments: `{"order":"` + order + `"}`})
			}
			return tulip.ModelResponse{ToolCalls: calls}, nil
		}
		if req.Turn == 2 && tc.again {
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{{ID: "c3", Name: "charge", Arguments: `{"order":"` + order + `"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "done"}, nil
	})
	return tulip.Options{Tools: []tulip.Toolset{tool}, Models: map[string]tulip.Model{"m": model}}
}

func (tc unknownCase) order() string { return "ord-" + tc.name }

// A tool that is not idempotent charges at a bank that ignores its key;
// the first attempt of each call goes wrong after (or before) the charge.
// With OnUnknown "check", the run asks the bank and the order is charged
// once: the answer is the call's result, or (not charged) the call runs
// again with the same key. The control, OnUnknown unset, lets Temporal
// retry, and the bank charges twice. Each run's history replays.
func TestUnknownOutcomeIsChecked(t *testing.T) {
	c := dial(t, server.Address())
	record := os.Getenv("TULIP_RECORD_HISTORIES") == "1"
	for _, tc := range unknownCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bk := newBank(t)
			var keys []string
			tq := taskQueue("unknown")
			wopts := tc.options(t, bk, &keys)
			startPublicWorker(t, c, tq, wopts)
			run, err := agent.Start(ctxT(t), c, agent.Options{TaskQueue: tq, Model: "m", Message: "charge it"})
			require.NoError(t, err)
			res, err := run.Await(ctxT(t))
			require.NoError(t, err)
			if tc.onUnknown == "hold" {
				require.Equal(t, agent.Interrupted, res.Status, "%+v", res)
				it := res.Interrupt
				assert.Equal(t, agent.UnknownHook, it.Hook)
				assert.Contains(t, it.Reason, "charge may have run")
				require.Len(t, it.Held, 1)
				assert.Equal(t, "c1", it.Held[0].ID)
				last := res.Trace[len(res.Trace)-1]
				assert.Equal(t, agent.Held, last.Outcome, "the call shows a held line while the run waits")
				assert.Equal(t, 1, bk.count(tc.order())+btoi(tc.fault == "before"), "nothing ran again while the run waits")
				// Refused, in one line: both a run and an answer; an
				// answer for another call.
				bads := []agent.ResumeInput{
					{InterruptID: it.ID, PerformDangling: true, Results: []agent.ToolResult{{CallID: "c1", Output: "{}"}}},
					agent.ClientResults(it.ID, agent.ToolResult{CallID: "c9", Output: "{}"}),
				}
				if tc.attempts == 1 {
					assert.Contains(t, it.Reason, "may not run again")
					bads = append(bads, agent.Approve(it.ID))
				}
				for _, bad := range bads {
					_, err = run.Resume(ctxT(t), bad)
					require.True(t, tulip.Is(err, tulip.BadInput), "%v", err)
				}
				_, err = run.Resume(ctxT(t), tc.resume(it.ID))
				require.NoError(t, err)
				res, err = run.Await(ctxT(t))
				require.NoError(t, err)
			}
			require.Equal(t, agent.Completed, res.Status, "%+v", res)

			assert.Equal(t, tc.charges, bk.count(tc.order()), "charges at the bank")
			line := res.Trace[len(res.Trace)-1]
			if tc.twin {
				line = res.Trace[0]
			}
			if tc.again {
				line = res.Trace[len(res.Trace)-2]
				again := res.Trace[len(res.Trace)-1]
				assert.Equal(t, "c3", again.CallID)
				assert.Equal(t, agent.Cached, again.Outcome, "the answer left matching on")
				assert.JSONEq(t, `{"charge_id":"ch-1"}`, string(again.Result), "served the person's answer")
			}
			assert.Equal(t, agent.Executed, line.Outcome)
			for _, k := range keys {
				assert.Equal(t, line.Key, k, "every attempt carries the call's key")
			}
			if tc.onUnknown == "" {
				assert.Nil(t, line.Unknown)
				return
			}
			require.NotNil(t, line.Unknown, "the line says the outcome was unknown")
			t.Logf("%s: %+v, result %s, error %v", tc.name, *line.Unknown, line.Result, ptrText(line.Error))
			assert.Equal(t, tc.resolution, line.Unknown.Resolution)
			if tc.onUnknown == "hold" {
				assert.Equal(t, 1, line.Unknown.Holds)
				assert.Zero(t, line.Unknown.Checks)
			} else {
				assert.Equal(t, 1, line.Unknown.Checks)
			}
			switch tc.resolution {
			case "applied", "answered":
				assert.JSONEq(t, `{"charge_id":"ch-1"}`, string(line.Result), "the check's (or the person's) answer is the result")
				assert.Nil(t, line.Error)
			case "retried":
				assert.Equal(t, 1, line.Unknown.Retries)
				assert.JSONEq(t, `{"charge_id":"ch-1"}`, string(line.Result))
			case "unresolved":
				require.NotNil(t, line.Error)
				assert.Contains(t, *line.Error, "may have run")
				if tc.onUnknown == "hold" {
					assert.Contains(t, *line.Error, "finance will reconcile it by hand")
				}
			}
			// The log says so too, on the call's record.
			recs, err := run.Log(ctxT(t))
			require.NoError(t, err)
			var rec *agent.Record
			for i := range recs {
				if recs[i].CallID == "c1" {
					rec = &recs[i]
				}
			}
			require.NotNil(t, rec, "the call is recorded")
			assert.Equal(t, line.Unknown, rec.Unknown, "the record holds what the trace line says")
			if tc.twin {
				require.Len(t, res.Trace, 2)
				assert.Equal(t, agent.Cached, res.Trace[1].Outcome)
				assert.JSONEq(t, string(line.Result), string(res.Trace[1].Result), "the twin is served the resolved outcome")
				assert.Nil(t, res.Trace[1].Error)
			}

			// The history replays, sticky cache off.
			file := filepath.Join(t.TempDir(), "h.json")
			if record {
				file = filepath.Join(unknownHistories, tc.name+".json")
			}
			writeHistory(t, c, runclient.Handle{WorkflowID: run.ID(), RunID: run.RunID()}, file)
			require.NoError(t, tulip.ReplayHistories(wopts, tulip.ReplayOptions{}, file))
		})
	}
}

// The recorded runs of each checking case replay under the current code.
func TestReplayUnknownHistories(t *testing.T) {
	bk := newBank(t)
	n := 0
	for _, tc := range unknownCases {
		file := filepath.Join(unknownHistories, tc.name+".json")
		if tc.onUnknown == "" {
			continue
		}
		n++
		var keys []string
		assert.NoError(t, tulip.ReplayHistories(tc.options(t, bk, &keys), tulip.ReplayOptions{}, file), tc.name)
		// The control: the same history under a tool that does not check
		// (its run schedules no check) does not replay.
		plain := tc
		plain.onUnknown = ""
		assert.Error(t, tulip.ReplayHistories(plain.options(t, bk, &keys), tulip.ReplayOptions{}, file), tc.name)
	}
	files, err := filepath.Glob(filepath.Join(unknownHistories, "*.json"))
	require.NoError(t, err)
	assert.Len(t, files, n, "a recorded history per checking case")
}

// NewTool refuses an OnUnknown that cannot work, in one line.
func TestOnUnknownRefused(t *testing.T) {
	body := func(context.Context, struct{}) (string, error) { return "", nil }
	check := func(context.Context, tulip.ToolInput) (json.RawMessage, bool, error) { return nil, false, nil }
	for _, tc := range []struct {
		spec tulip.ToolSpec
		opts tulip.ToolOptions
	}{
		{tulip.ToolSpec{Name: "a", OnUnknown: "check"}, tulip.ToolOptions{}},
		{tulip.ToolSpec{Name: "b"}, tulip.ToolOptions{Check: check}},
		{tulip.ToolSpec{Name: "c", OnUnknown: "hope"}, tulip.ToolOptions{}},
		{tulip.ToolSpec{Name: "d", OnUnknown: "check", Local: true}, tulip.ToolOptions{Check: check}},
		{tulip.ToolSpec{Name: "e", OnUnknown: "hold"}, tulip.ToolOptions{Check: check}},
		{tulip.ToolSpec{Name: "f", OnUnknown: "hold", Local: true}, tulip.ToolOptions{}},
	} {
		_, err := tulip.NewTool(tc.spec, body, tc.opts)
		require.Error(t, err, tc.spec.Name)
		t.Log(err)
	}
	_, err := tulip.NewTool(tulip.ToolSpec{Name: "ok", OnUnknown: "check"}, body, tulip.ToolOptions{Check: check})
	assert.NoError(t, err)
	_, err = tulip.NewTool(tulip.ToolSpec{Name: "ok2", OnUnknown: "hold"}, body)
	assert.NoError(t, err)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ptrText(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A real worker process is SIGKILLed inside issue_refund's body after
// billing made the refund and before the result: the attempt's outcome is
// unknown. With OnUnknown "check", a second process asks billing by key
// and the run records billing's receipt; the refund's key reached billing
// once. With "hold", the run waits for a person, who looks the key up at
// billing and answers with the receipt: once too. The control, OnUnknown unset: Temporal retries the attempt and
// billing sees the key twice (it honours the key; a service that did not
// would refund twice).
func TestUnknownOutcomeAfterKill(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGKILL of a child process: Linux only")
	}
	bin := crashWorker(t)
	const trials = 4
	for _, mode := range []string{"check", "hold", "retry"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bill, err := billing.Start()
			require.NoError(t, err)
			defer bill.Close()
			c := dial(t, server.Address())
			tq := taskQueue("unknown-kill-" + mode)
			onUnknown := mode
			if mode == "retry" {
				onUnknown = ""
			}
			args := []string{"-address", server.Address(), "-task-queue", tq, "-billing", bill.URL(), "-on-unknown", onUnknown}
			repeats := 0
			for i := range trials {
				order := fmt.Sprintf("ord-unknown-%s-%d", mode, i)
				key := "refund:" + order + ":120:v1"
				marker := filepath.Join(t.TempDir(), "crashed")
				first := startWorkerProcess(t, bin, append(args, "-crash-at", "after-billing", "-marker", marker)...)
				h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "refund", Message: order,
					ThreadID: fmt.Sprintf("%s-%d", tq, i), WorkflowTaskTimeout: 2 * time.Second})
				require.NoError(t, err)
				awaitKilled(t, first, fmt.Sprintf("%s trial %d", mode, i))
				second := startWorkerProcess(t, bin, args...)
				res, err := runclient.Await(ctxT(t), c, h, "")
				if err == nil && mode == "hold" {
					require.Equal(t, agentrun.StatusInterrupted, res.Status, "trial %d", i)
					require.Equal(t, agentrun.UnknownHook, res.Interrupt.Hook)
					rc, found, lerr := (billing.Client{BaseURL: bill.URL()}).Lookup(ctxT(t), key)
					require.NoError(t, lerr)
					require.True(t, found, "trial %d: billing made the refund", i)
					out, _ := json.Marshal(rc)
					_, err = runclient.Resume(ctxT(t), c, h.WorkflowID, agentrun.ResumeInput{InterruptID: res.Interrupt.ID,
						Results: []agentrun.ToolResult{{CallID: res.Interrupt.Held[0].ID, Output: string(out)}}})
					require.NoError(t, err)
					res, err = runclient.Await(ctxT(t), c, h, res.Interrupt.ID)
				}
				_ = second.Process.Kill()
				_ = second.Wait()
				require.NoError(t, err)
				require.Equal(t, agentrun.StatusCompleted, res.Status, "trial %d", i)

				sent := 0
				for _, r := range bill.Witnesses() {
					if r.Key == key {
						sent++
					}
				}
				repeats += sent - 1
				line := res.Trace[len(res.Trace)-1]
				if mode == "retry" {
					assert.Equal(t, 2, sent, "trial %d: Temporal retried the lost attempt: billing saw the key twice", i)
					assert.Nil(t, line.Unknown)
					continue
				}
				assert.Equal(t, 1, sent, "trial %d: the key reached billing once", i)
				require.NotNil(t, line.Unknown, "trial %d", i)
				want := agentrun.ResolvedApplied
				if mode == "hold" {
					want = agentrun.ResolvedAnswered
				}
				assert.Equal(t, want, line.Unknown.Resolution)
				var rc billing.Receipt
				require.NoError(t, json.Unmarshal(line.Result, &rc))
				assert.Equal(t, bill.Refunds()[i].RefundID, rc.RefundID, "trial %d: the run holds billing's receipt", i)
				if i == 0 {
					t.Logf("trace line: %s", line.Unknown.Cause)
				}
			}
			t.Logf("%s: %d trials, %d requests repeated at billing", mode, trials, repeats)
		})
	}
}
