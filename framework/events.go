package framework

import (
	"context"

	"k8s.io/client-go/tools/events"
)

// EventRecorder returns a recorder that writes events.k8s.io/v1 Events with
// reportingController set to name (typically the controller's name). Events
// are sent in the background while the manager runs, aggregated and
// rate-limited by client-go; recording never blocks a reconcile.
func (m *Manager) EventRecorder(name string) events.EventRecorder {
	return m.events.NewRecorder(m.opts.Scheme, name)
}

// runEvents sends recorded events until ctx ends.
func (m *Manager) runEvents(ctx context.Context) error {
	if err := m.events.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	m.events.Shutdown()
	return nil
}
