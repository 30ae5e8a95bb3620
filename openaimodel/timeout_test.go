package openaimodel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

// A model call is bounded by its progress, not a fixed total: a streamed
// answer that keeps sending runs past IdleTimeout (and past the old fixed
// 60 s, scaled down here), one that stalls fails retryably after
// IdleTimeout, and Timeout still bounds the whole.
func TestIdleTimeout(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		pieces, gap := 8, 150*time.Millisecond
		if r.URL.Query().Get("stall") != "" || r.Header.Get("X-Stall") != "" {
			gap = 2 * time.Second
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range pieces {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"p%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	req := tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "hi"}}, OnText: func(string) {}}

	m, err := New(Options{BaseURL: srv.URL, Model: "m", IdleTimeout: 500 * time.Millisecond, Timeout: time.Minute})
	require.NoError(t, err)
	start := time.Now()
	resp, err := m.Respond(context.Background(), req)
	require.NoError(t, err, "1.2 s of progress, each wait under the idle bound")
	assert.Greater(t, time.Since(start), 500*time.Millisecond)
	assert.Equal(t, "p0 p1 p2 p3 p4 p5 p6 p7 ", resp.Text)

	stalled, err := New(Options{BaseURL: srv.URL, Model: "m", IdleTimeout: 500 * time.Millisecond, Timeout: time.Minute,
		HTTPClient: &http.Client{Transport: stallHeader{}}})
	require.NoError(t, err)
	_, err = stalled.Respond(context.Background(), req)
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, ErrRetryable, ae.Type())
	assert.Contains(t, ae.Message(), "no progress for 500ms")

	whole, err := New(Options{BaseURL: srv.URL, Model: "m", IdleTimeout: time.Minute, Timeout: 400 * time.Millisecond})
	require.NoError(t, err)
	_, err = whole.Respond(context.Background(), req)
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Contains(t, ae.Message(), "took over 400ms")
}

// An unstreamed answer that takes longer than IdleTimeout to begin (its
// headers come when it is whole) is not cut: Timeout bounds it.
func TestIdleTimeoutUnstreamed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1200 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"thought long"}}]}`)
	}))
	defer srv.Close()
	m, err := New(Options{BaseURL: srv.URL, Model: "m", IdleTimeout: 300 * time.Millisecond, Timeout: time.Minute})
	require.NoError(t, err)
	resp, err := m.Respond(context.Background(), tulip.ModelRequest{Messages: []tulip.Message{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	assert.Equal(t, "thought long", resp.Text)
}

// stallHeader asks the test server to stall between pieces.
type stallHeader struct{}

func (stallHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Stall", "1")
	return http.DefaultTransport.RoundTrip(r)
}
