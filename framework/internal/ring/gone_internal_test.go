package ring

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// slowDeletes counts the deletes of Leases, each of which returns once
// release is closed.
type slowDeletes struct {
	coordclient.LeaseInterface
	deletes atomic.Int64
	release chan struct{}
}

func (s *slowDeletes) Delete(context.Context, string, metav1.DeleteOptions) error {
	s.deletes.Add(1)
	<-s.release
	return nil
}

// leasesIn is a LeasesGetter of one namespace's Leases.
type leasesIn struct{ l coordclient.LeaseInterface }

func (g leasesIn) Leases(string) coordclient.LeaseInterface { return g.l }

func TestAGoneClustersLeaseHasOneDeleteInFlight(t *testing.T) {
	// The ring looks at its Leases often; until the cache shows the Lease
	// of a cluster no member finds gone, each look would delete it again.
	// One delete is in flight per Lease; once it returned, a later look may
	// send another (the cache may have missed the first).
	synctest.Test(t, func(t *testing.T) {
		leases := &slowDeletes{LeaseInterface: fake.NewClientset().CoordinationV1().Leases("ns"), release: make(chan struct{})}
		deletes, release := &leases.deletes, leases.release
		opts := sharding.Options{Ring: "r", Buckets: sharding.Buckets{Count: 4},
			Lease: lease.Options{Namespace: "ns", Identity: "me", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}}
		r := New(leasesIn{leases}, opts, logr.Discard(), NewMetrics(opts.Ring))
		gone := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: ClusterLeaseName("r", "edge-1"), ResourceVersion: "7",
			Labels: map[string]string{RoleLabel: RoleCluster, ClusterLabel: "edge-1"}}}
		byName := map[string]*coordinationv1.Lease{gone.Name: gone}
		look := func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.deleteGoneLocked(t.Context(), byName, map[string]bool{}, time.Now())
		}
		for range 5 {
			look()
		}
		synctest.Wait()
		if n := deletes.Load(); n != 1 {
			t.Errorf("5 looks at a gone cluster's Lease sent %d deletes at once, want 1", n)
		}
		close(release)
		synctest.Wait()
		look()
		synctest.Wait()
		if n := deletes.Load(); n != 2 {
			t.Errorf("a look after the delete returned sent %d deletes in all, want 2", n)
		}

		// Adversarial: a cluster a member finds keeps its Lease.
		look = func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.deleteGoneLocked(t.Context(), byName, map[string]bool{"edge-1": true}, time.Now())
		}
		look()
		synctest.Wait()
		if n := deletes.Load(); n != 2 {
			t.Errorf("a look at a found cluster's Lease sent a delete (%d in all, want 2)", n)
		}
	})
}
