package framework

import (
	"strconv"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/internal/klogcap"
	"github.com/converge-dev/converge/reconcile"
)

// reconcileSink is the log sink of one reconcile. It adds the controller, the
// object, the reconcile ID and the reason to each line, but only when a line is actually
// written: a reconcile that logs nothing costs one small allocation, not the
// WithValues chain (and its copies) that most sinks do eagerly.
type reconcileSink struct {
	base       logr.LogSink // the controller's sink
	deeper     logr.LogSink // base, one call frame deeper (see deeperSink)
	controller string
	req        reconcile.Request
	id         uint64
	reason     reconcile.Reason
	// blocked is the reconcile's last NoteBlocked, nil for none.
	blocked atomic.Pointer[introspect.Blocker]
}

var _ logr.LogSink = (*reconcileSink)(nil)

// deeperSink returns parent adjusted for the extra frame reconcileSink adds,
// so file:line in log output points at the user's call.
func deeperSink(parent logr.LogSink) logr.LogSink {
	if d, ok := parent.(logr.CallDepthLogSink); ok {
		return d.WithCallDepth(1)
	}
	return parent
}

func (s *reconcileSink) Init(logr.RuntimeInfo) {}

// Enabled caps the reconcile's logger at klogcap.MaxLevel: client-go logs
// through it too.
func (s *reconcileSink) Enabled(level int) bool {
	return level <= klogcap.MaxLevel && s.deeper.Enabled(level)
}

func (s *reconcileSink) values(kv []any) []any {
	out := make([]any, 0, 10+len(kv))
	out = append(out, "controller", s.controller)
	if s.req.Namespace != "" {
		out = append(out, "namespace", s.req.Namespace)
	}
	out = append(out, "name", s.req.Name, "reconcileID", strconv.FormatUint(s.id, 10))
	if s.reason != "" {
		out = append(out, "reason", string(s.reason))
	}
	return append(out, kv...)
}

func (s *reconcileSink) Info(level int, msg string, kv ...any) {
	if level <= klogcap.MaxLevel {
		s.deeper.Info(level, msg, s.values(kv)...)
	}
}

func (s *reconcileSink) Error(err error, msg string, kv ...any) {
	s.deeper.Error(err, msg, s.values(kv)...)
}

func (s *reconcileSink) WithValues(kv ...any) logr.LogSink {
	// Values added by the user are rare: materialize the prefix once here.
	return klogcap.Sink(s.base.WithValues(s.values(kv)...))
}

func (s *reconcileSink) WithName(name string) logr.LogSink {
	base := s.base.WithName(name)
	return &reconcileSink{base: base, deeper: deeperSink(base), controller: s.controller, req: s.req, id: s.id, reason: s.reason}
}

// capVerbosity returns l limited to klogcap.MaxLevel, the highest
// verbosity converge hands to client-go (see package klogcap).
func capVerbosity(l logr.Logger) logr.Logger { return klogcap.Logger(l) }
