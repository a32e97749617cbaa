// Package recorder records the manager's events.k8s.io/v1 Events: it
// completes what the API server requires and a caller may leave out, cuts
// what is longer than the server takes, keeps typed nils away from
// client-go's recorder, and logs an event the server rejects as one line
// naming the object it regards, never an event or object whole.
package recorder

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/go-logr/logr"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/converge-dev/converge/framework/internal/reconcilelog"
	"github.com/converge-dev/converge/internal/typednil"
)

// New returns a recorder made by b that sets reportingController to name and
// logs through log, objects redacted (see Redact). It records nothing
// regarding a nil or typed nil object, logging one error naming the
// argument, and treats a typed nil related object as none.
func New(b events.EventBroadcaster, scheme *runtime.Scheme, name string, log logr.Logger) events.EventRecorder {
	log = Redact(log)
	return nilSafeRecorder{r: b.NewRecorder(scheme, name).WithLogger(log), log: log}
}

// nilSafeRecorder keeps typed nils away from client-go's recorder, which
// dereferences them.
type nilSafeRecorder struct {
	r   events.EventRecorder
	log logr.Logger
}

var _ events.EventRecorder = nilSafeRecorder{}

// Eventf records an event regarding regarding, unless it is nil.
func (n nilSafeRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if err := typednil.Check("regarding", regarding); err != nil {
		n.log.Error(err, "event not recorded", "type", eventtype, "reason", reason, "action", action)
		return
	}
	if typednil.Is(related) {
		related = nil
	}
	n.r.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// Run sends the events recorded through b until ctx ends, then shuts b
// down.
func Run(ctx context.Context, b events.EventBroadcaster) error {
	// client-go logs an event it gives up on whole, through ctx's logger.
	ctx = klog.NewContext(ctx, Redact(klog.FromContext(ctx)))
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	b.Shutdown()
	return nil
}

// Limits the API server puts on new events.k8s.io/v1 Events.
const (
	eventFieldLimit = 128  // reason, action, reportingInstance
	eventNoteLimit  = 1024 // note, in bytes
)

// Sink writes the manager's events: it completes each new event (see
// completeEvent), and reports an event the server rejects itself, in one
// line, hiding the error from client-go, which would log the whole event.
type Sink struct {
	events.EventSink
	log logr.Logger
}

func NewSink(c eventsv1client.EventsV1Interface, log logr.Logger) *Sink {
	return &Sink{EventSink: &events.EventSinkImpl{Interface: c}, log: log}
}

// Create creates ev, completed.
func (s *Sink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	completeEvent(ev)
	out, err := s.EventSink.Create(ctx, ev)
	return out, s.rejected(ev, err)
}

// Update updates ev, completed.
func (s *Sink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	completeEvent(ev)
	out, err := s.EventSink.Update(ctx, ev)
	return out, s.rejected(ev, err)
}

// Patch patches ev (the count of a series).
func (s *Sink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.EventSink.Patch(ctx, ev, data)
	if apierrors.IsNotFound(err) {
		return out, err // client-go creates the event instead
	}
	return out, s.rejected(ev, err)
}

// rejected returns the error of a write of ev that client-go should see: a
// transport error, which it retries, and a name clash within a series,
// which it retries as a patch. An error that drops the event is logged here
// and hidden.
func (s *Sink) rejected(ev *eventsv1.Event, err error) error {
	var (
		status    *apierrors.StatusError
		construct *rest.RequestConstructionError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &status) && apierrors.IsAlreadyExists(err):
		if ev.Series != nil {
			return err
		}
		return nil // recorded before
	case errors.As(err, &status), errors.As(err, &construct):
		s.log.Error(err, "event not recorded",
			"regarding", reference(ev.Regarding.Kind, ev.Regarding.Namespace, ev.Regarding.Name),
			"type", ev.Type, "reason", ev.Reason, "action", ev.Action, "reportingController", ev.ReportingController)
		return nil
	}
	return err
}

// completeEvent fills in what the API server requires of a new event and a
// caller may leave out, and cuts what is longer than the server takes.
func completeEvent(ev *eventsv1.Event) {
	if ev.Action == "" {
		ev.Action = ev.Reason
	}
	if ev.Reason == "" {
		ev.Reason = ev.Action
	}
	ev.Action = cut(ev.Action, eventFieldLimit)
	ev.Reason = cut(ev.Reason, eventFieldLimit)
	ev.ReportingInstance = cut(ev.ReportingInstance, eventFieldLimit)
	ev.Note = cut(ev.Note, eventNoteLimit)
}

// cut shortens s to at most n bytes, on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func reference(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// Redact returns l logging API objects in key/value pairs as a
// reference ("ConfigMap ns/name") instead of whole.
func Redact(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return l.WithSink(redactingSink{reconcilelog.Deeper(l.GetSink())})
}

// redactingSink is a LogSink that logs API objects as references.
type redactingSink struct{ logr.LogSink }

func (s redactingSink) Info(level int, msg string, kv ...any) {
	s.LogSink.Info(level, msg, redact(kv)...)
}

func (s redactingSink) Error(err error, msg string, kv ...any) {
	s.LogSink.Error(err, msg, redact(kv)...)
}

func (s redactingSink) WithValues(kv ...any) logr.LogSink {
	return redactingSink{s.LogSink.WithValues(redact(kv)...)}
}

func (s redactingSink) WithName(name string) logr.LogSink {
	return redactingSink{s.LogSink.WithName(name)}
}

// redact returns kv with every API object replaced by its reference.
func redact(kv []any) []any {
	var out []any // a copy, once something is replaced
	for i, v := range kv {
		ref, ok := describeObject(v)
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), kv...)
		}
		out[i] = ref
	}
	if out == nil {
		return kv
	}
	return out
}

func describeObject(v any) (string, bool) {
	switch o := v.(type) {
	case *eventsv1.Event:
		if o == nil {
			return "", false
		}
		return fmt.Sprintf("%s event %s regarding %s", o.Type, o.Reason, reference(o.Regarding.Kind, o.Regarding.Namespace, o.Regarding.Name)), true
	case runtime.Object:
		if typednil.Is(o) {
			return "", false
		}
		acc, err := meta.Accessor(o)
		if err != nil {
			return fmt.Sprintf("%T", o), true
		}
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if kind == "" {
			kind = fmt.Sprintf("%T", o)
		}
		return reference(kind, acc.GetNamespace(), acc.GetName()), true
	}
	return "", false
}
