package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Listen opens addr. Its error names the server (what), the address and
// the setting that chose the address (the flag and the Options field), so
// a port already taken says what to change.
func Listen(what, setting, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("framework: serve %s on %q (set by %s): %w", what, addr, setting, err)
	}
	return l, nil
}

// NewServer returns an http.Server with conservative limits: slow clients
// cannot hold connections open or send huge headers.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// DisableHTTP2 turns HTTP/2 off for srv's TLS connections.
func DisableHTTP2(srv *http.Server) {
	// A non-nil, empty map turns HTTP/2 off for TLS connections.
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
}

// Serve runs srv on l (over TLS when tlsConfig is not nil) until ctx ends,
// then shuts it down gracefully and returns nil. It returns the server's
// error if it stops serving before that.
func Serve(ctx context.Context, srv *http.Server, l net.Listener, tlsConfig *tls.Config) error {
	errc := make(chan error, 1)
	go func() {
		var err error
		if tlsConfig != nil {
			err = srv.Serve(tls.NewListener(l, tlsConfig))
		} else {
			err = srv.Serve(l)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		return <-errc
	}
}
