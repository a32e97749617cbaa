package recorder

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCompleteEvent(t *testing.T) {
	long := strings.Repeat("x", 127) + "é" // 129 bytes, the cut falls inside é
	for _, tc := range []struct {
		name                 string
		in                   eventsv1.Event
		reason, action, note string
	}{
		{"action defaults to the reason", eventsv1.Event{Reason: "Synced"}, "Synced", "Synced", ""},
		{"reason defaults to the action", eventsv1.Event{Action: "Apply"}, "Apply", "Apply", ""},
		{"both set", eventsv1.Event{Reason: "R", Action: "A"}, "R", "A", ""},
		{"too long, cut on a character", eventsv1.Event{Reason: long, Action: "A", Note: strings.Repeat("é", 600)}, strings.Repeat("x", 127), "A", strings.Repeat("é", 512)},
	} {
		ev := tc.in
		completeEvent(&ev)
		if ev.Reason != tc.reason || ev.Action != tc.action || ev.Note != tc.note {
			t.Errorf("%s: reason %q action %q note of %d bytes; want %q %q and %d bytes", tc.name, ev.Reason, ev.Action, len(ev.Note), tc.reason, tc.action, len(tc.note))
		}
	}
}

// fakeEventSink answers every write with err.
type fakeEventSink struct{ err error }

func (f fakeEventSink) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return ev, f.err
}

func (f fakeEventSink) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return ev, f.err
}

func (f fakeEventSink) Patch(_ context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return ev, f.err
}

func TestEventSinkReportsRejectionsItself(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "cm.1", field.ErrorList{field.Required(field.NewPath("action"), "")})
	transport := errors.New("connection refused")
	for _, tc := range []struct {
		name   string
		err    error
		series bool
		patch  bool
		pass   error // what client-go sees
		logged bool
	}{
		{"accepted", nil, false, false, nil, false},
		{"rejected as invalid", invalid, false, false, nil, true},
		{"rejected on patch", apierrors.NewForbidden(gr, "cm.1", errors.New("no")), false, true, nil, true},
		{"gone on patch: client-go creates it", apierrors.NewNotFound(gr, "cm.1"), true, true, apierrors.NewNotFound(gr, "cm.1"), false},
		{"a series created twice: client-go retries", apierrors.NewAlreadyExists(gr, "cm.1"), true, false, apierrors.NewAlreadyExists(gr, "cm.1"), false},
		{"created before", apierrors.NewAlreadyExists(gr, "cm.1"), false, false, nil, false},
		{"transport: client-go retries", transport, false, false, transport, false},
	} {
		var lines []string
		s := &Sink{EventSink: fakeEventSink{err: tc.err}, log: funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})}
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm.1"},
			Reason:     "Noted", Note: "secret note",
			Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "ns", Name: "cm"},
		}
		if tc.series {
			ev.Series = &eventsv1.EventSeries{Count: 2}
		}
		var err error
		if tc.patch {
			_, err = s.Patch(t.Context(), ev, nil)
		} else {
			_, err = s.Create(t.Context(), ev)
		}
		if (err == nil) != (tc.pass == nil) || (err != nil && err.Error() != tc.pass.Error()) {
			t.Errorf("%s: client-go sees %v, want %v", tc.name, err, tc.pass)
		}
		if got := len(lines) == 1; got != tc.logged || len(lines) > 1 {
			t.Errorf("%s: logged %q, want one line: %v", tc.name, lines, tc.logged)
		}
		for _, l := range lines {
			if strings.Contains(l, "secret note") || !strings.Contains(l, "ConfigMap ns/cm") {
				t.Errorf("%s: logged %s: want the object regarded, not the note", tc.name, l)
			}
		}
	}
}

func TestRedactObjects(t *testing.T) {
	var line string
	log := Redact(funcr.New(func(prefix, args string) { line = args }, funcr.Options{}))
	var nilPod *corev1.Pod
	log.Info("x", "event", &eventsv1.Event{Type: "Warning", Reason: "R", Note: "body", Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"}},
		"object", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"k": "body"}},
		"nil", nilPod, "n", 3)
	if strings.Contains(line, "body") {
		t.Errorf("logged an object whole: %s", line)
	}
	for _, s := range []string{`"Warning event R regarding Pod ns/p"`, `"*v1.ConfigMap ns/c"`, `"n"=3`} {
		if !strings.Contains(line, s) {
			t.Errorf("logged %s, want %s in it", line, s)
		}
	}
}
