package framework

import (
	"strconv"

	"github.com/go-logr/logr"

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

// Enabled caps the reconcile's logger at maxClientGoLevel: client-go logs
// through it too.
func (s *reconcileSink) Enabled(level int) bool {
	return level <= maxClientGoLevel && s.deeper.Enabled(level)
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
	if level <= maxClientGoLevel {
		s.deeper.Info(level, msg, s.values(kv)...)
	}
}

func (s *reconcileSink) Error(err error, msg string, kv ...any) {
	s.deeper.Error(err, msg, s.values(kv)...)
}

func (s *reconcileSink) WithValues(kv ...any) logr.LogSink {
	// Values added by the user are rare: materialize the prefix once here.
	return cappedSink{LogSink: s.base.WithValues(s.values(kv)...), max: maxClientGoLevel}
}

func (s *reconcileSink) WithName(name string) logr.LogSink {
	cp := *s
	cp.base = s.base.WithName(name)
	cp.deeper = deeperSink(cp.base)
	return &cp
}

// maxClientGoLevel is the highest verbosity converge hands to client-go
// through a logger. From V(8) on, client-go writes request and response
// bodies (Secret data) and at higher levels request headers (bearer tokens).
// Kubernetes reserves those levels for such dumps; converge keeps them off
// whatever -v is.
const maxClientGoLevel = 7

// cappedSink drops lines above max.
type cappedSink struct {
	logr.LogSink
	max int
}

// capVerbosity returns l limited to maxClientGoLevel.
func capVerbosity(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	if _, ok := l.GetSink().(cappedSink); ok {
		return l
	}
	return l.WithSink(cappedSink{LogSink: l.GetSink(), max: maxClientGoLevel})
}

func (c cappedSink) Enabled(level int) bool { return level <= c.max && c.LogSink.Enabled(level) }

func (c cappedSink) Info(level int, msg string, kv ...any) {
	if level <= c.max {
		c.LogSink.Info(level, msg, kv...)
	}
}

func (c cappedSink) WithValues(kv ...any) logr.LogSink {
	return cappedSink{LogSink: c.LogSink.WithValues(kv...), max: c.max}
}

func (c cappedSink) WithName(name string) logr.LogSink {
	return cappedSink{LogSink: c.LogSink.WithName(name), max: c.max}
}

func (c cappedSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := c.LogSink.(logr.CallDepthLogSink); ok {
		return cappedSink{LogSink: d.WithCallDepth(depth), max: c.max}
	}
	return c
}
