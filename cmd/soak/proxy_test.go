package soak

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer echoes lines on loopback until the test ends.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader) (time.Duration, error) {
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		t.Fatalf("echo %q", line)
	}
	return time.Since(start), err
}

func TestProxy(t *testing.T) {
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Address())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial()
	if d, err := roundTrip(t, c, r); err != nil || d > time.Second {
		t.Fatalf("through the proxy: %s %v", d, err)
	}

	// Delay: each chunk waits, both ways.
	p.Delay(200 * time.Millisecond)
	if d, err := roundTrip(t, c, r); err != nil || d < 400*time.Millisecond {
		t.Fatalf("delayed round trip: %s %v", d, err)
	}
	p.Delay(0)
	if d, err := roundTrip(t, c, r); err != nil || d > 150*time.Millisecond {
		t.Fatalf("after the delay: %s %v", d, err)
	}

	// Drop: the open connection dies, a new one works.
	if n := p.Drop(); n != 1 {
		t.Fatalf("dropped %d connections, want 1", n)
	}
	if _, err := roundTrip(t, c, r); err == nil {
		_, err = roundTrip(t, c, r)
		if err == nil {
			t.Fatal("a dropped connection still echoes")
		}
	}
	c2, r2 := dial()
	if _, err := roundTrip(t, c2, r2); err != nil {
		t.Fatalf("a new connection after the drop: %v", err)
	}
}
