package soak

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// S3Proxy stands between the workers and the S3 server: it forwards every
// request as it came (the Host header too, which the client signed), and
// on command answers 503 SlowDown instead, or forwards late. The SDK's
// retryer takes a SlowDown; past its attempts the activity is retried.
type S3Proxy struct {
	srv *http.Server
	url string

	mu      sync.Mutex
	failing bool
	delay   time.Duration
	refused atomic.Int64
}

// StartS3Proxy starts a proxy on loopback in front of target (an http URL).
func StartS3Proxy(target string) (*S3Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &S3Proxy{url: "http://" + ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = nil
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		w.WriteHeader(http.StatusBadGateway) // the server is away (restarting, paused)
	}
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		failing, delay := p.failing, p.delay
		p.mu.Unlock()
		if failing {
			p.refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
			return
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's endpoint.
func (p *S3Proxy) URL() string { return p.url }

// Fail answers every request with 503 SlowDown while on.
func (p *S3Proxy) Fail(on bool) {
	p.mu.Lock()
	p.failing = on
	p.mu.Unlock()
}

// Delay forwards every request d late (0: at once).
func (p *S3Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Refused counts the requests answered with 503.
func (p *S3Proxy) Refused() int64 { return p.refused.Load() }

// Close stops the proxy.
func (p *S3Proxy) Close() { _ = p.srv.Close() }
