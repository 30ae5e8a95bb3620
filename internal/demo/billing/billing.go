// Package billing is a reference downstream service for the demo and the
// tests: a small HTTP billing API on loopback that stores refunds by
// idempotency key. A repeated key returns the original receipt; a key reused
// with a different request is refused (422). It is what closes the
// external-success crash window: the tool body sends the same key on every
// attempt, so however often it runs, one refund is made.
package billing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/demo/loopback"
	"github.com/tulip-temporal/tulip/internal/demo/witness"
)

// RefundRequest is the body of POST /refunds.
type RefundRequest struct {
	OrderID string      `json:"order_id"`
	Amount  json.Number `json:"amount"`
}

// Receipt is a refund made.
type Receipt struct {
	RefundID string      `json:"refund_id"`
	OrderID  string      `json:"order_id"`
	Amount   json.Number `json:"amount"`
}

// Server is the billing service.
type Server struct {
	mu      sync.Mutex
	witness witness.Log
	byKey   map[string]entry
	made    []Receipt
	*loopback.Server
}

type entry struct {
	req     RefundRequest
	receipt Receipt
}

// Start serves billing on a free loopback port.
func Start() (*Server, error) {
	s := &Server{byKey: map[string]entry{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /refunds", s.refund)
	mux.HandleFunc("GET /refunds", s.list)
	mux.HandleFunc("GET /refunds/by-key/{key}", s.byKeyLookup)
	srv, err := loopback.Serve("billing", mux)
	if err != nil {
		return nil, err
	}
	s.Server = srv
	return s, nil
}

// KeyOf returns the idempotency key the refund with this id was made
// under ("" when there is none).
func (s *Server) KeyOf(refundID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.byKey {
		if e.receipt.RefundID == refundID {
			return k
		}
	}
	return ""
}

// Witnesses returns every refund request received, in order, with what it
// named (package witness): repeats of a key and refused ones too.
func (s *Server) Witnesses() []witness.Request { return s.witness.Requests() }

// Refunds returns the refunds made, in order.
func (s *Server) Refunds() []Receipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Receipt(nil), s.made...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) refund(w http.ResponseWriter, r *http.Request) {
	s.witness.Add(witness.FromRequest("billing", r))
	key := r.Header.Get(activities.IdempotencyKeyHeader)
	if key == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "missing Idempotency-Key header"})
		return
	}
	var req RefundRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil || req.OrderID == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {order_id, amount}"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byKey[key]; ok {
		if e.req != req {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "idempotency key reused with a different request"})
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, e.receipt)
		return
	}
	rc := Receipt{RefundID: fmt.Sprintf("re_%d", len(s.made)+1), OrderID: req.OrderID, Amount: req.Amount}
	s.byKey[key] = entry{req: req, receipt: rc}
	s.made = append(s.made, rc)
	writeJSON(w, http.StatusCreated, rc)
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Refunds())
}

// byKeyLookup answers whether a key made a refund: its receipt, or 404.
func (s *Server) byKeyLookup(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	e, ok := s.byKey[r.PathValue("key")]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no refund with this key"})
		return
	}
	writeJSON(w, http.StatusOK, e.receipt)
}

// ErrRejected is wrapped by errors for requests billing refused (4xx).
var ErrRejected = errors.New("billing refused the request")

// Client calls a billing service.
type Client struct {
	BaseURL string
	// HTTP is the client used. Zero value: one with a 10 s timeout.
	HTTP *http.Client
}

// Lookup asks billing whether the refund with idempotency key key was
// made: its receipt, or false (a tool's check, ToolOptions.Check).
func (c Client) Lookup(ctx context.Context, key string) (Receipt, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/refunds/by-key/"+url.PathEscape(key), nil)
	if err != nil {
		return Receipt{}, false, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("billing: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Receipt{}, false, nil
	case resp.StatusCode != http.StatusOK:
		return Receipt{}, false, fmt.Errorf("billing: lookup status %d", resp.StatusCode)
	}
	var rc Receipt
	dec := json.NewDecoder(io.LimitReader(resp.Body, 1<<20))
	dec.UseNumber()
	if err := dec.Decode(&rc); err != nil {
		return Receipt{}, false, fmt.Errorf("billing: bad receipt: %w", err)
	}
	return rc, true, nil
}

// Refund asks billing for a refund. The request carries the tool
// execution's idempotency key from ctx, so every attempt of one execution
// is one refund, and names the call, run and attempt (witness.SetHeaders).
func (c Client) Refund(ctx context.Context, orderID string, amount json.Number) (Receipt, error) {
	body, _ := json.Marshal(RefundRequest{OrderID: orderID, Amount: amount})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/refunds", bytes.NewReader(body))
	if err != nil {
		return Receipt{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := witness.SetHeaders(ctx, req); err != nil {
		return Receipt{}, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Receipt{}, fmt.Errorf("billing: %w", err) // retryable: Temporal tries again, with the same key
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return Receipt{}, activities.ToolError(fmt.Sprintf("billing refused the refund (%d): %s", resp.StatusCode, bytes.TrimSpace(msg)), "billing.Rejected", true)
	}
	if resp.StatusCode >= 300 {
		return Receipt{}, fmt.Errorf("billing: status %d", resp.StatusCode)
	}
	var rc Receipt
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&rc); err != nil {
		return Receipt{}, fmt.Errorf("billing: bad receipt: %w", err)
	}
	return rc, nil
}
