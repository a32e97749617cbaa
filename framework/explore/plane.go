package explore

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/informers"
)

// plane is where a schedule runs: a fake API server of its own
// (fakePlane), or the test control plane of Options.Envtest (realPlane).
type plane interface {
	// config returns a config for the client identity: the managers',
	// the scenario's or the invariants'. The managers' and the
	// scenario's requests go through schedule.intercept.
	config(identity string) *rest.Config
	mapper() meta.RESTMapper
	// setUp prepares the cluster for the schedule, before the first
	// manager starts.
	setUp(ctx context.Context, scenario *client.Client) error
	// crash refuses every later write of identity, unanswered.
	crash(identity string)
	// caughtUp returns "" when the manager's watches have delivered
	// what the plane knows they must, else what is on its way: on the
	// fake, every event the server made, to the manager and to the
	// scenario's cache (a step reads it); on a test control plane, whose
	// server cannot tell, what a restart or an Expire fault holds up.
	// That every informer has an open watch is idle's, on both planes.
	caughtUp(r *managerRun) string
	// lag makes identity's watches hold back up to events events each;
	// 0 lets them through.
	lag(identity string, events int)
	// lastRead describes the managers' last list or watch request of
	// kind, for a report of an informer that is not watching; "" when
	// the plane cannot tell (the fake, which has no connection to lose).
	lastRead(kind schema.GroupVersionKind) string
	// quiet is how long the controllers must stay idle, with no write
	// committed, to count as converged; a broken invariant is checked
	// again after 20 times as long before it fails the schedule, so that
	// an event still on its way to a cache raises no false alarm.
	quiet() time.Duration
	// close undoes what the schedule did to the cluster.
	close() error
}

// fakePlane is a fake API server of the schedule's own.
type fakePlane struct {
	srv *fake.Server
	m   meta.RESTMapper
}

func newFakePlane(s *schedule) (*fakePlane, error) {
	srv, err := fake.NewServer(fake.Options{Scheme: s.opts.Scheme, CRDs: s.opts.CRDs, ClusterScoped: s.opts.ClusterScoped, Objects: s.opts.Objects})
	if err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	p := &fakePlane{srv: srv}
	srv.Intercept(func(r fake.Request, serve func() int) error {
		return s.intercept(request{identity: r.Identity, verb: r.Verb, kind: r.Kind, namespace: r.Namespace, name: r.Name, subresource: r.Subresource}, serve)
	})
	if p.m, err = informers.NewRESTMapper(srv.ConfigAs(invariantIdentity), nil); err != nil {
		srv.Close()
		return nil, fmt.Errorf("explore: discovery on the fake API server: %w", err)
	}
	return p, nil
}

func (p *fakePlane) config(identity string) *rest.Config { return p.srv.ConfigAs(identity) }
func (p *fakePlane) mapper() meta.RESTMapper             { return p.m }
func (p *fakePlane) setUp(context.Context, *client.Client) error {
	return nil // fake.Options.Objects are stored
}
func (p *fakePlane) crash(identity string)                   { p.srv.CrashAfter(identity, 0) }
func (p *fakePlane) lag(identity string, events int)         { p.srv.LagWatches(identity, events) }
func (p *fakePlane) quiet() time.Duration                    { return 15 * time.Millisecond }
func (p *fakePlane) close() error                            { p.srv.Close(); return nil }
func (p *fakePlane) lastRead(schema.GroupVersionKind) string { return "" }

func (p *fakePlane) caughtUp(r *managerRun) string {
	for _, id := range []string{r.identity, scenarioIdentity} {
		if !p.srv.WatchesCaughtUp(id) {
			return "watch events are on their way to " + id
		}
	}
	return ""
}
