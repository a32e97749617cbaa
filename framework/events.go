package framework

import (
	"context"

	"k8s.io/client-go/tools/events"

	"github.com/converge-dev/converge/framework/internal/recorder"
	"github.com/converge-dev/converge/internal/klogcap"
)

// EventRecorder returns a recorder that writes events.k8s.io/v1 Events with
// reportingController set to name (typically the controller's name), which
// must be a qualified name ("my-controller", "example.com/my-controller").
// Events are sent in the background while the manager runs, aggregated and
// rate-limited by client-go; recording never blocks a reconcile.
//
// What the API server requires and a call may leave out is filled in: an
// empty action is the reason, an empty reason the action; a reason, action
// or reportingInstance longer than 128 characters, or a note longer than
// 1024 bytes, is cut. An event the server rejects all the same is dropped
// and logged as one error naming the object it regards and the server's
// answer; events and objects are never logged whole.
//
// An event regarding a nil object, or a typed nil (a nil *corev1.Pod), is
// not recorded: Eventf logs one error naming the argument and returns. A
// nil related object, typed or not, means none.
func (m *Manager) EventRecorder(name string) events.EventRecorder {
	return recorder.New(m.events, m.opts.Scheme, name, klogcap.Logger(m.log))
}

// runEvents sends recorded events until ctx ends.
func (m *Manager) runEvents(ctx context.Context) error { return recorder.Run(ctx, m.events) }
