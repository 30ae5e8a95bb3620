package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// proxy is the one address the clients know: a round-robin reverse proxy
// (httputil.ReverseProxy) in front of the serve instances, as a load
// balancer is. It sends a request to the next instance in turn that is in
// rotation; a request it could not hand to that instance (the connection
// refused, or the request not written whole) goes to the next one, since
// that instance cannot have acted on it. A request that was written and
// then lost its connection before an answer is ambiguous: the proxy
// answers 502 with the header ambiguousHeader and tries no other
// instance. When no instance takes it within proxyPatience, it answers
// 503 with notSentHeader.
//
// Each request has its own connection (no keep-alive to the instances):
// none is ever written to a connection an instance closed at shutdown.
type proxy struct {
	backends []*backend
	next     atomic.Uint64
	tr       *http.Transport
	srv      *http.Server
	url      string

	failovers atomic.Int64 // requests handed to another instance than first tried
	ambiguous atomic.Int64 // requests answered 502 ambiguous
	notSent   atomic.Int64 // requests no instance took
}

// backend is one serve instance.
type backend struct {
	host string
	// out: taken out of rotation (before its restart, as a load balancer
	// drains an instance), or not yet in it.
	out atomic.Bool
}

const (
	ambiguousHeader = "X-Serveload-Ambiguous"
	notSentHeader   = "X-Serveload-Not-Sent"
	proxyPatience   = 30 * time.Second
)

// errNotSent: no instance took the request.
var errNotSent = errors.New("no serve instance took the request")

func startProxy(hosts []string) (*proxy, error) {
	p := &proxy{tr: &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: 0}}
	for _, h := range hosts {
		p.backends = append(p.backends, &backend{host: h})
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "serve"}) // the instance is chosen by RoundTrip
		},
		Transport:     p,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left
			}
			if errors.Is(err, errNotSent) {
				p.notSent.Add(1)
				w.Header().Set(notSentHeader, "true")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":{"message":"no serve instance took the request","type":"server_error","code":"no_instance","param":null}}`)
				return
			}
			p.ambiguous.Add(1)
			w.Header().Set(ambiguousHeader, "true")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `{"error":{"message":"the serve instance dropped the request: `+jsonEscape(err.Error())+`","type":"server_error","code":"bad_gateway","param":null}}`)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	p.url = "http://" + ln.Addr().String()
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *proxy) close() {
	_ = p.srv.Close()
	p.tr.CloseIdleConnections()
}

// RoundTrip hands req to an instance in rotation, the next in turn first.
func (p *proxy) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
	}
	first := int(p.next.Add(1))
	deadline := time.Now().Add(proxyPatience)
	tried := false
	for {
		for i := range p.backends {
			b := p.backends[(first+i)%len(p.backends)]
			if b.out.Load() {
				continue
			}
			if tried {
				p.failovers.Add(1)
			}
			tried = true
			resp, sent, err := p.send(req, b, body)
			if err == nil {
				return resp, nil
			}
			if sent || req.Context().Err() != nil {
				return nil, err // ambiguous (the instance may have acted on it), or the client left
			}
		}
		if time.Now().After(deadline) {
			return nil, errNotSent
		}
		select {
		case <-req.Context().Done():
			return nil, errNotSent
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// send sends req to b and says whether it was written whole (sent).
func (p *proxy) send(req *http.Request, b *backend, body []byte) (*http.Response, bool, error) {
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) { wrote.Store(info.Err == nil) },
	})
	out := req.Clone(ctx)
	out.URL.Scheme, out.URL.Host, out.Host = "http", b.host, b.host
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) == 0 {
		out.Body, out.GetBody = http.NoBody, nil
	}
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		return nil, wrote.Load() && !errors.Is(err, context.Canceled), err
	}
	return resp, true, nil
}

// setOut takes instance i out of rotation, or puts it back.
func (p *proxy) setOut(i int, out bool) { p.backends[i].out.Store(out) }

func jsonEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
