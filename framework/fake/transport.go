package fake

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// transport hands requests to the server's handler in memory. The
// response is returned as soon as the handler writes its header, and its
// body streams what the handler writes next (a watch); closing the body
// cancels the request's context.
type transport struct {
	server   *Server
	identity string
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-t.server.closed:
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, ErrClosed
	default:
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), identityKey{}, t.identity))
	r = r.WithContext(ctx)
	pr, pw := io.Pipe()
	w := &responseWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing
			_ = pw.Close()
		}()
		t.server.handler.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
		if w.err != nil {
			cancel()
			_ = pr.Close()
			return nil, w.err
		}
	case <-ctx.Done():
		_ = pr.CloseWithError(ctx.Err())
		cancel()
		return nil, ctx.Err()
	}
	return &http.Response{
		Status:     http.StatusText(w.code),
		StatusCode: w.code,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     w.header,
		Body:       &body{PipeReader: pr, cancel: cancel},
		Request:    r,
	}, nil
}

// body is a response body whose Close ends the request.
type body struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *body) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// responseWriter writes a response into a pipe.
type responseWriter struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	code   int
	// ready is closed once the header is written, or fail was called.
	ready chan struct{}
	// err, set by fail before ready is closed, is the transport's error:
	// the request got no answer.
	err error
}

// fail ends the request with no answer: the round trip returns err.
func (w *responseWriter) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.header = w.header.Clone()
		close(w.ready)
	})
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush does nothing: every Write reaches the reader at once.
func (w *responseWriter) Flush() {}
