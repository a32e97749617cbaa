package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/framework/internal/shard"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// A bucket lost while its informers are being made (its holding's context
// ended meanwhile) is undone: read returns the context's error, publishes
// nothing, and lets go of the informers it made, which stop with their
// last holder. The member here holds no bucket (its ring is still
// forming), so the informers read made are its only holds.
// startFakeMember starts a manager on srv, in ring "r" of namespace
// default as member "me" with opts' other options, with a sharded
// controller of ConfigMaps that does nothing, and returns it with the
// controller's shard.Primary once the controller started.
func startFakeMember(t *testing.T, srv *fake.Server, opts sharding.Options) (*Manager, *shard.Primary[*corev1.ConfigMap]) {
	t.Helper()
	opts.Ring, opts.Lease.Namespace, opts.Lease.Identity = "r", "default", "me"
	mgr, err := NewManager(srv.Config(), Options{Sharding: opts})
	if err != nil {
		t.Fatal(err)
	}
	err = NewBuilder[*corev1.ConfigMap](mgr, "cms", ControllerOptions{Sharded: true}).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	p := mgr.ring.Users()[0].(*shard.Primary[*corev1.ConfigMap])
	select {
	case <-p.Started():
	case <-time.After(time.Minute):
		t.Fatal("the sharded controller did not start within a minute")
	}
	return mgr, p
}

// ringUntil polls mgr's sharding.Status until cond holds, failing after a
// minute.
func ringUntil(t *testing.T, mgr *Manager, what string, cond func(sharding.Status) bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		st, _ := mgr.RingStatus()
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ring %+v: %s: not within a minute", st, what)
		}
	}
}

func TestShardReadOfABucketLostMidwayIsUndone(t *testing.T) {
	srv := fake.Start(t, fake.Options{Objects: []object.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}},
	}})
	mgr, p := startFakeMember(t, srv, sharding.Options{FormationDelay: time.Hour})
	ringUntil(t, mgr, "forming, holding nothing", func(st sharding.Status) bool {
		if len(st.Serving)+len(st.Syncing) > 0 {
			t.Fatalf("ring %+v: want it forming, holding nothing", st)
		}
		return st.Forming
	})
	ctx := t.Context()

	lost, lose := context.WithCancel(ctx)
	lose()
	rd, err := p.Read(lost, 3, nil)
	if !errors.Is(err, context.Canceled) || rd != nil {
		t.Fatalf("read of a bucket lost meanwhile = %v, %v; want nothing and context.Canceled", rd, err)
	}
	if p.Reading(3) {
		t.Error("read published a bucket lost meanwhile")
	}
	holds := mgr.holds.Len()
	if holds != 0 {
		t.Errorf("%d informers still held after the lost read", holds)
	}
	for _, inf := range mgr.debugState(time.Now()).Informers {
		if strings.Contains(inf.Description, "shardRange") {
			t.Errorf("informer %s of a bucket lost meanwhile is still in the cache", inf.Description)
		}
	}
}

// A sharded controller's object status says where the object falls in the
// ring: served here, or held by another member, which Explain names
// instead of calling the object never seen.
func TestShardStatusNamesTheBucketsHolder(t *testing.T) {
	buckets := sharding.Buckets{By: sharding.ByNamespace, Count: 32}
	owners := ring.Assign(32, []string{"me", "other"})
	nsOf := map[string]string{} // owner -> a namespace of one of its buckets
	for i := 0; len(nsOf) < 2; i++ {
		ns := fmt.Sprint("ns-", i)
		if _, ok := nsOf[owners[buckets.Of(ns)]]; !ok {
			nsOf[owners[buckets.Of(ns)]] = ns
		}
	}
	// Member other is live and holds its buckets, as a member that runs
	// elsewhere does, for longer than the test.
	now := metav1.NewMicroTime(time.Now())
	long := int32(3600)
	other := "other"
	objs := []object.Object{
		&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ring.MemberLeaseName("r", other),
				Labels:      map[string]string{ring.RingLabel: "r", ring.RoleLabel: ring.RoleMember},
				Annotations: map[string]string{ring.LayoutAnno: "32/" + string(sharding.ByNamespace), ring.ControllersAnno: "cms (ConfigMap)"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &long, RenewTime: &now},
		},
	}
	for b, owner := range owners {
		if owner == other {
			objs = append(objs, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ring.BucketLeaseName("r", b),
					Labels: map[string]string{ring.RingLabel: "r", ring.RoleLabel: ring.RoleBucket, ring.BucketLabel: fmt.Sprint(b)}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &long, AcquireTime: &now, RenewTime: &now},
			})
		}
	}
	for _, ns := range nsOf {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}})
	}
	srv := fake.Start(t, fake.Options{Objects: objs})
	mgr, _ := startFakeMember(t, srv, sharding.Options{Buckets: sharding.Buckets{By: sharding.ByNamespace}, Lease: lease.Options{Duration: time.Hour, RenewDeadline: 50 * time.Minute}})
	ringUntil(t, mgr, "serving its 16 buckets", func(st sharding.Status) bool { return len(st.Serving) == 16 })
	c := mgr.inspectedControllers()[0]

	mine := c.keyStatus(reconcile.Request{Namespace: nsOf["me"], Name: "a"}, time.Now())
	if sh := mine.Shard; sh == nil || sh.State != "serving" || sh.Bucket != buckets.Of(nsOf["me"]) || sh.Holder != "" {
		t.Errorf("status of an object served here: %+v", sh)
	}
	theirs := c.keyStatus(reconcile.Request{Namespace: nsOf[other], Name: "a"}, time.Now())
	if sh := theirs.Shard; sh == nil || sh.State != "" || sh.Holder != other || sh.Bucket != buckets.Of(nsOf[other]) {
		t.Errorf("status of an object of another member's bucket: %+v", sh)
	}
	lines, converged := theirs.Explain(time.Now())
	if converged || len(lines) != 1 || !strings.Contains(lines[0], "is held by member other, which reconciles it") {
		t.Errorf("another member's object explained as converged=%v: %q", converged, lines)
	}
}
