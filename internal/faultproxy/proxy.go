// Package faultproxy is a TCP proxy for fault-injection tests: placed between a
// client and a server, it passes traffic, delays it, holds it (delivers
// nothing until released, then everything, in order, as a healing
// partition does), resets every connection, or blackholes it (accepts and
// reads, never answers), on command. It works below TLS, so the client
// still verifies the server.
package faultproxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does with traffic.
type Mode int

const (
	// Pass forwards traffic both ways.
	Pass Mode = iota
	// Delay forwards traffic after a fixed delay per chunk.
	Delay
	// Reset closes every connection with a TCP reset and refuses new ones
	// the same way.
	Reset
	// Blackhole keeps connections open and reads from them, but forwards and
	// answers nothing: a half-open connection, as after a network partition.
	Blackhole
	// Hold keeps connections open and reads from them, but forwards nothing
	// until the mode changes; then what it held is forwarded, in order, and
	// obeys the new mode: bytes delayed, not dropped, as by a partition that
	// heals. A connection accepted meanwhile is dialled once the hold ends.
	Hold
)

func (m Mode) String() string {
	return [...]string{"pass", "delay", "reset", "blackhole", "hold"}[m]
}

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	target string
	l      net.Listener

	mu sync.Mutex
	// mode and delay say what to do with traffic; mu guards them, conns,
	// accepted and closed.
	mode  Mode
	delay time.Duration
	// conns are the open client connections with their upstream ones.
	conns    map[*pair]struct{}
	accepted int
	closed   bool
	// changed is closed and replaced when the mode changes.
	changed chan struct{}
}

type pair struct{ client, upstream net.Conn }

// New starts a proxy on a free loopback port, forwarding to target.
func New(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, l: l, conns: map[*pair]struct{}{}, changed: make(chan struct{})}
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open returns how many client connections are open: accepted and not
// yet closed by either side.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// SetMode switches what the proxy does. Switching to Reset resets every
// open connection; switching from Blackhole to Pass does not revive the
// connections the blackhole held (their streams are already out of step),
// but they are closed only when the client gives up on them. Switching
// from Hold forwards what was held.
func (p *Proxy) SetMode(m Mode, delay time.Duration) {
	p.mu.Lock()
	p.mode, p.delay = m, delay
	close(p.changed)
	p.changed = make(chan struct{})
	var toReset []*pair
	if m == Reset {
		for c := range p.conns {
			toReset = append(toReset, c)
		}
	}
	p.mu.Unlock()
	for _, c := range toReset {
		c.reset()
	}
}

// ResetAll resets every open connection without changing the mode.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	conns := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	// Whatever is held or blackholed is dropped.
	p.mode = Reset
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	err := p.l.Close()
	p.ResetAll()
	return err
}

func (p *Proxy) state() (Mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		mode := p.mode
		p.mu.Unlock()
		if mode == Reset {
			resetConn(c)
			continue
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	pr := &pair{client: client}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		resetConn(client)
		return
	}
	p.conns[pr] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
		pr.reset()
	}()

	// A connection accepted while blackholed stays blackholed: the client's
	// handshake bytes are swallowed. One accepted while held waits for the
	// hold to end (its bytes wait in the socket).
	mode, _, changed := p.state()
	if mode == Blackhole {
		_, _ = io.Copy(io.Discard, client)
		return
	}
	for mode == Hold {
		<-changed
		mode, _, changed = p.state()
	}
	if mode != Pass && mode != Delay {
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	pr.upstream = up
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, client); done <- struct{}{} }()
	go func() { p.pipe(client, up); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst chunk by chunk, obeying the mode for each chunk.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			mode, delay, changed := p.state()
			for mode == Blackhole || mode == Hold {
				// Hold the data (the peer sees silence) until the mode
				// changes. Out of a blackhole it is dropped (the stream
				// is broken anyway); out of a hold it goes on as the new
				// mode says, the next chunks waiting in the sender's
				// socket meanwhile, in order.
				held := mode
				<-changed
				mode, delay, changed = p.state()
				if held == Blackhole && mode != Blackhole {
					return
				}
			}
			switch mode {
			case Reset:
				return
			case Delay:
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *pair) reset() {
	resetConn(c.client)
	if c.upstream != nil {
		resetConn(c.upstream)
	}
}

// resetConn closes c with a TCP RST rather than a FIN.
func resetConn(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = c.Close()
}
