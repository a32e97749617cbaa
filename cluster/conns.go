package cluster

import (
	"context"
	"net"
	"sync"
	"time"
)

// conns dials the connections of a cluster that has an API server of its
// own (not the manager's) and closes them all once its cache has stopped.
// Closing only the idle ones is not enough: a watch whose context was
// cancelled returns before its HTTP/2 stream is released, so the
// connection may not be idle yet, and an idle one stays open until the
// transport's idle timeout (client-go's 90 s). A Dial in the cluster's
// configuration also gives it a transport of its own (client-go shares
// transports only between configurations without one), so closing its
// connections closes no other cluster's.
type conns struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu sync.Mutex
	// open are the connections dialled and not yet closed; closed is set
	// by closeAll, after which a new connection is closed at once. mu
	// guards both.
	open   map[*conn]struct{}
	closed bool
}

// newConns returns the dialler of a cluster: dial when not nil (the
// configuration's own), else a net.Dialer as client-go's.
func newConns(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *conns {
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout, KeepAlive: dialTimeout}).DialContext
	}
	return &conns{dial: dial, open: map[*conn]struct{}{}}
}

// dialTimeout is client-go's dial timeout and keep-alive period.
const dialTimeout = 30 * time.Second

// DialContext dials addr and tracks the connection.
func (d *conns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = nc.Close()
		return nil, ErrDisengaged
	}
	d.open[c] = struct{}{}
	return c, nil
}

// closeAll closes every connection and every later one.
func (d *conns) closeAll() {
	d.mu.Lock()
	d.closed = true
	open := d.open
	d.open = map[*conn]struct{}{}
	d.mu.Unlock()
	for c := range open {
		_ = c.Conn.Close()
	}
}

// conn is a tracked connection: Close forgets it.
type conn struct {
	net.Conn
	d    *conns
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.open, c)
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}
