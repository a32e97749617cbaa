package klogcap

import "github.com/go-logr/logr"

// MaxLevel is the highest verbosity converge hands to client-go through a
// logger. Kubernetes reserves the levels above it for request and response
// dumps.
const MaxLevel = 7

// cappedSink drops lines above max.
type cappedSink struct {
	logr.LogSink
	max int
}

// Logger returns l limited to MaxLevel. A logger without a sink is returned
// as is.
func Logger(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	if _, ok := l.GetSink().(cappedSink); ok {
		return l
	}
	return l.WithSink(cappedSink{LogSink: l.GetSink(), max: MaxLevel})
}

// Sink returns s limited to MaxLevel.
func Sink(s logr.LogSink) logr.LogSink {
	return cappedSink{LogSink: s, max: MaxLevel}
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
