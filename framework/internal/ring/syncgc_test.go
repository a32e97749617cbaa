package ring

import (
	"context"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// gogc reads the garbage collector's current GOGC.
func gogc() int {
	s := []runtimemetrics.Sample{{Name: "/gc/gogc:percent"}}
	runtimemetrics.Read(s)
	return int(s[0].Value.Uint64())
}

// gcUser is a sharded controller whose reads of a bucket record the GOGC
// they ran under; its other methods are not called here.
type gcUser struct {
	User
	during []int
	served bool
}

func (u *gcUser) Acquire(context.Context, int, map[string]string) error {
	u.during = append(u.during, gogc())
	return nil
}

func (u *gcUser) Serve(_ context.Context, _ int, on bool) { u.served = on }

// gcRing returns a ring of SyncHeapRatio ratio holding unit u, with GOGC
// at 100 until the test ends.
func gcRing(t *testing.T, ratio float64, u unit) (*Ring, *heldBucket) {
	t.Helper()
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	opts := sharding.Options{
		Ring:    "r",
		Buckets: sharding.Buckets{Count: 4},
		Lease:   lease.Options{Namespace: "ns", Identity: "me", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}
	r := New(fake.NewClientset().CoordinationV1(), opts, logr.Discard(), NewMetrics(opts.Ring))
	r.SyncHeapRatio = ratio
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	h := &heldBucket{lease: &coordinationv1.Lease{}, since: time.Now(), ctx: ctx, cancel: cancel}
	r.held[u] = h
	return r, h
}

func TestBucketReadSyncsUnderSyncHeapRatio(t *testing.T) {
	// A member's buckets are its caches: their first sync decodes most of
	// what the member keeps, as the manager's first sync does, and runs
	// with GOGC at 100 × (Options.SyncHeapRatio − 1), restored once it is
	// done.
	r, h := gcRing(t, 1.3, bucketUnit(1))
	a, b := &gcUser{}, &gcUser{}
	r.acquire(bucketUnit(1), h, []participant{bucketPart{a, 1}, bucketPart{b, 1}})
	for name, u := range map[string]*gcUser{"first": a, "second": b} {
		if len(u.during) != 1 || u.during[0] != 30 {
			t.Errorf("the %s controller read the bucket with GOGC %v, want once at 30 (SyncHeapRatio 1.3)", name, u.during)
		}
		if !u.served {
			t.Errorf("the %s controller does not serve the bucket it read", name)
		}
	}
	if got := gogc(); got != 100 {
		t.Errorf("GOGC after the bucket synced is %d, want 100 again", got)
	}
}

func TestBucketReadLeavesGCAloneWhenSyncHeapRatioIsNegative(t *testing.T) {
	r, h := gcRing(t, -1, bucketUnit(0))
	u := &gcUser{}
	r.acquire(bucketUnit(0), h, []participant{bucketPart{u, 0}})
	if len(u.during) != 1 || u.during[0] != 100 {
		t.Errorf("with SyncHeapRatio negative the bucket was read with GOGC %v, want 100 (untouched)", u.during)
	}
}

// gcClusters is a ClusterUser whose Acquire records the GOGC it ran
// under; its other methods are not called here.
type gcClusters struct {
	ClusterUser
	during []int
}

func (u *gcClusters) Acquire(context.Context, string) error {
	u.during = append(u.during, gogc())
	return nil
}

func (u *gcClusters) Serve(context.Context, string, bool) {}

func TestClusterAcquireIsNotBoundByTheRing(t *testing.T) {
	// Acquiring a cluster waits for its engagement first, which may never
	// come (an API server that does not answer): the ring leaves GOGC
	// alone around it, and the ClusterUser bounds the informers' sync
	// itself (spread.Gate.Acquire).
	r, h := gcRing(t, 1.3, clusterUnit("edge-1"))
	u := &gcClusters{}
	r.acquire(clusterUnit("edge-1"), h, []participant{clusterPart{u, "edge-1"}})
	if len(u.during) != 1 || u.during[0] != 100 {
		t.Errorf("the cluster was acquired with GOGC %v, want once at 100 (left to the ClusterUser)", u.during)
	}
}
