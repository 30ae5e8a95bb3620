// Package loopback serves the demo services: an HTTP handler on a free
// loopback port, from Serve until Close.
package loopback

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server is a handler served on loopback.
type Server struct {
	srv     *http.Server
	ln      net.Listener
	stopped chan struct{}
}

// Serve serves h on a free loopback port; name prefixes its errors.
func Serve(name string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &Server{ln: ln, stopped: make(chan struct{}), srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	go func() {
		defer close(s.stopped)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the service's base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the service and waits until it has stopped.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.stopped
}
