// Package pager is a reference downstream service with no idempotency: a
// small HTTP paging API on loopback that pages on every POST, whatever its
// Idempotency-Key. A tool that calls it twice pages twice, so it is where a
// body that ran twice shows. It records every request it receives (package
// witness).
package pager

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tulip-temporal/tulip/internal/demo/loopback"
	"github.com/tulip-temporal/tulip/internal/demo/witness"
)

// Page is a page sent.
type Page struct {
	PageID  string `json:"page_id"`
	CaseID  string `json:"case_id"`
	Summary string `json:"summary"`
}

// Server is the pager service.
type Server struct {
	mu      sync.Mutex
	pages   int
	witness witness.Log
	*loopback.Server
}

// Start serves the pager on a free loopback port.
func Start() (*Server, error) {
	s := &Server{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /pages", s.page)
	srv, err := loopback.Serve("pager", mux)
	if err != nil {
		return nil, err
	}
	s.Server = srv
	return s, nil
}

// Pages is how many pages were sent: one per POST.
func (s *Server) Pages() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages
}

// Witnesses returns every request received, in order.
func (s *Server) Witnesses() []witness.Request { return s.witness.Requests() }

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	s.witness.Add(witness.FromRequest("pager", r))
	var p Page
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p); err != nil || p.CaseID == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.pages++
	p.PageID = fmt.Sprintf("pg_%d", s.pages)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(p)
}

// Client calls a pager service.
type Client struct {
	BaseURL string
	// HTTP is the client used. Zero value: one with a 10 s timeout.
	HTTP *http.Client
}

// Page pages about a case. The request names the tool execution running in
// ctx (witness.SetHeaders); outside a tool body it fails.
func (c Client) Page(ctx context.Context, caseID, summary string) (Page, error) {
	body, _ := json.Marshal(Page{CaseID: caseID, Summary: summary})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/pages", bytes.NewReader(body))
	if err != nil {
		return Page{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := witness.SetHeaders(ctx, req); err != nil {
		return Page{}, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Page{}, fmt.Errorf("pager: %w", err) // retryable
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return Page{}, fmt.Errorf("pager: status %d", resp.StatusCode)
	}
	var p Page
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return Page{}, fmt.Errorf("pager: bad answer: %w", err)
	}
	return p, nil
}
