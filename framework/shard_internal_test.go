package framework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// A bucket lost while its informers are being made (its holding's context
// ended meanwhile) is undone: read returns the context's error, publishes
// nothing, and lets go of the informers it made, which stop with their
// last holder. The member here holds no bucket (its ring is still
// forming), so the informers read made are its only holds.
func TestShardReadOfABucketLostMidwayIsUndone(t *testing.T) {
	srv := fake.Start(t, fake.Options{Objects: []object.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}},
	}})
	mgr, err := NewManager(srv.Config(), Options{
		Sharding: ShardingOptions{Ring: "r", Namespace: "default", Identity: "me", FormationDelay: time.Hour},
	})
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
	p := mgr.ring.users[0].(*shardedPrimary[*corev1.ConfigMap])
	select {
	case <-p.started:
	case <-time.After(time.Minute):
		t.Fatal("the sharded controller did not start within a minute")
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		st, _ := mgr.RingStatus()
		if len(st.Serving)+len(st.Syncing) > 0 {
			t.Fatalf("ring %+v: want it forming, holding nothing", st)
		}
		if st.Forming {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ring %+v: not forming within a minute", st)
		}
	}

	lost, lose := context.WithCancel(ctx)
	lose()
	rd, err := p.read(lost, 3, nil)
	if !errors.Is(err, context.Canceled) || rd != nil {
		t.Fatalf("read of a bucket lost meanwhile = %v, %v; want nothing and context.Canceled", rd, err)
	}
	p.mu.Lock()
	published := p.reads[3]
	p.mu.Unlock()
	if published != nil {
		t.Error("read published a bucket lost meanwhile")
	}
	mgr.ring.holds.mu.Lock()
	holds := len(mgr.ring.holds.n)
	mgr.ring.holds.mu.Unlock()
	if holds != 0 {
		t.Errorf("%d informers still held after the lost read", holds)
	}
	for _, inf := range mgr.debugState(time.Now()).Informers {
		if strings.Contains(inf.Description, "shardRange") {
			t.Errorf("informer %s of a bucket lost meanwhile is still in the cache", inf.Description)
		}
	}
}
