// Package reconcilelog is the log sink of one reconcile: it adds the
// controller, the object, the reconcile ID and the reason to each line a
// reconcile logs, caps verbosity at klogcap.MaxLevel, and carries the
// reconcile's last NoteBlocked. The reconcile's context holds the sink
// (Context), where From finds it. Call runs a reconcile, logging a panic
// through that sink and turning it into an error.
package reconcilelog

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/internal/klogcap"
	"github.com/converge-dev/converge/reconcile"
)

// Sink is the log sink of one reconcile. It adds the controller, the
// object (with its cluster, when it is not the manager's own), the
// reconcile ID and the reason to each line, but only when a line is actually
// written: a reconcile that logs nothing costs one small allocation, not the
// WithValues chain (and its copies) that most sinks do eagerly.
type Sink struct {
	Base       logr.LogSink // the controller's sink
	Deeper     logr.LogSink // Base, one call frame deeper (see Deeper)
	Controller string
	Req        reconcile.Request
	ID         uint64
	Reason     reconcile.Reason
	// Blocked is the reconcile's last NoteBlocked, nil for none.
	Blocked atomic.Pointer[reconcile.Blocker]
}

var _ logr.LogSink = (*Sink)(nil)

// Deeper returns parent adjusted for the extra frame Sink adds,
// so file:line in log output points at the user's call.
func Deeper(parent logr.LogSink) logr.LogSink {
	if d, ok := parent.(logr.CallDepthLogSink); ok {
		return d.WithCallDepth(1)
	}
	return parent
}

func (s *Sink) Init(logr.RuntimeInfo) {}

// Enabled caps the reconcile's logger at klogcap.MaxLevel: client-go logs
// through it too.
func (s *Sink) Enabled(level int) bool {
	return level <= klogcap.MaxLevel && s.Deeper.Enabled(level)
}

func (s *Sink) values(kv []any) []any {
	out := make([]any, 0, 10+len(kv))
	out = append(out, "controller", s.Controller)
	if s.Req.Cluster != "" {
		out = append(out, "cluster", s.Req.Cluster) // none for the manager's own
	}
	if s.Req.Namespace != "" {
		out = append(out, "namespace", s.Req.Namespace)
	}
	out = append(out, "name", s.Req.Name, "reconcileID", strconv.FormatUint(s.ID, 10))
	if s.Reason != "" {
		out = append(out, "reason", string(s.Reason))
	}
	return append(out, kv...)
}

func (s *Sink) Info(level int, msg string, kv ...any) {
	if level <= klogcap.MaxLevel {
		s.Deeper.Info(level, msg, s.values(kv)...)
	}
}

func (s *Sink) Error(err error, msg string, kv ...any) {
	s.Deeper.Error(err, msg, s.values(kv)...)
}

func (s *Sink) WithValues(kv ...any) logr.LogSink {
	// Values added by the user are rare: materialize the prefix once here.
	return klogcap.Sink(s.Base.WithValues(s.values(kv)...))
}

func (s *Sink) WithName(name string) logr.LogSink {
	base := s.Base.WithName(name)
	return &Sink{Base: base, Deeper: Deeper(base), Controller: s.Controller, Req: s.Req, ID: s.ID, Reason: s.Reason}
}

// sinkKey is the context key under which a reconcile's context holds its
// *Sink.
type sinkKey struct{}

// Context is the context of one reconcile: Context (which holds the
// reconcile's logger) with its Sink, which From finds. The sink lives in
// the context itself, so the two take one allocation, not two.
type Context struct {
	context.Context
	Sink Sink
}

// Value returns the Sink for the key From uses, else Context's value.
func (c *Context) Value(key any) any {
	if _, ok := key.(sinkKey); ok {
		return &c.Sink
	}
	return c.Context.Value(key)
}

// From returns the sink of the reconcile whose context is ctx, nil when
// ctx does not come from a controller's reconcile.
func From(ctx context.Context) *Sink {
	s, _ := ctx.Value(sinkKey{}).(*Sink)
	return s
}
