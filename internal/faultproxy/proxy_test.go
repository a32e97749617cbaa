package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/faultproxy"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	return line, err
}

func TestModes(t *testing.T) {
	p, err := faultproxy.New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}

	c, r := dial()
	if got, err := roundTrip(c, r, "hello", 5*time.Second); err != nil || got != "hello\n" {
		t.Fatalf("pass: got %q, %v", got, err)
	}

	p.SetMode(faultproxy.Delay, 200*time.Millisecond)
	start := time.Now()
	if got, err := roundTrip(c, r, "slow", 5*time.Second); err != nil || got != "slow\n" {
		t.Fatalf("delay: got %q, %v", got, err)
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Errorf("delay mode: round trip took %v, want at least 2 × 200ms", took)
	}

	p.SetMode(faultproxy.Blackhole, 0)
	var ne net.Error
	if _, err := roundTrip(c, r, "void", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackhole on an open connection: err %v, want a timeout", err)
	}
	b, br := dial() // a new connection is accepted, then silent
	if _, err := roundTrip(b, br, "void", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackhole on a new connection: err %v, want a timeout", err)
	}

	p.SetMode(faultproxy.Reset, 0)
	if _, err := roundTrip(c, r, "x", 2*time.Second); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("reset on an open connection: err %v, want a connection error", err)
	}
	// A new connection is reset as soon as it is accepted: the error comes
	// from the dial itself when the reset wins the race with connect's
	// return, else from the first round trip.
	d, err := net.Dial("tcp", p.Addr())
	if err == nil {
		t.Cleanup(func() { d.Close() })
		_, err = roundTrip(d, bufio.NewReader(d), "x", 2*time.Second)
	}
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("reset on a new connection: err %v, want a connection error", err)
	}

	p.SetMode(faultproxy.Pass, 0)
	e, er := dial()
	if got, err := roundTrip(e, er, "healed", 5*time.Second); err != nil || got != "healed\n" {
		t.Fatalf("healed: got %q, %v", got, err)
	}
}

func TestHoldDeliversWhatItHeldOnRelease(t *testing.T) {
	p, err := faultproxy.New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "before", 5*time.Second); err != nil || got != "before\n" {
		t.Fatalf("pass: got %q, %v", got, err)
	}

	p.SetMode(faultproxy.Hold, 0)
	var ne net.Error
	if _, err := roundTrip(c, r, "one", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("hold: err %v, want a timeout", err)
	}
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	// A connection opened during the hold is held too.
	d, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	dr := bufio.NewReader(d)
	if _, err := roundTrip(d, dr, "new", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("hold on a new connection: err %v, want a timeout", err)
	}

	p.SetMode(faultproxy.Pass, 0)
	for _, want := range []string{"one\n", "two\n"} {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if got, err := r.ReadString('\n'); err != nil || got != want {
			t.Fatalf("released: got %q, %v; want %q, delivered in order", got, err, want)
		}
	}
	_ = d.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := dr.ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("released new connection: got %q, %v", got, err)
	}
}
