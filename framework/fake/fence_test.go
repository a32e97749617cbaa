package fake_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/object"
)

// A fenced client refuses a write whatever context it is given, even when
// the fence starts failing between the client's first check and the
// request leaving the process; its reads and the cache's watches are never
// fenced, and a client built without a fence on the same cache writes.
func TestFenceRefusesWritesOnly(t *testing.T) {
	s := staticSiteScheme(t)
	srv := fake.Start(t, fake.Options{Scheme: s, Objects: []object.Object{configMap("seen")}})
	cs := kubernetes.NewForConfigOrDie(srv.Config())
	mgr, _ := startManager(t, srv, framework.Options{Scheme: s})
	errFenced := errors.New("fenced for the test")
	var checks atomic.Int32
	fenced, err := client.New(client.Options{Config: srv.Config(), Scheme: mgr.Scheme(), Mapper: mgr.RESTMapper(), Cache: mgr.Cache(),
		Fence: func() error {
			if checks.Add(1) == 1 {
				return nil // the first check passes: the fence fails as the request leaves
			}
			return errFenced
		}})
	if err != nil {
		t.Fatal(err)
	}
	err = fenced.Create(context.Background(), configMap("late"))
	if !errors.Is(err, errFenced) {
		t.Fatalf("a write fenced after the client's first check: got %v, want an error wrapping the fence's", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(t.Context(), "late", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused write reached the server: %v", err)
	}
	if err := fenced.Delete(context.Background(), configMap("seen")); !errors.Is(err, errFenced) {
		t.Errorf("a delete while fenced: got %v, want an error wrapping the fence's", err)
	}

	// Reads are not fenced, and the cache keeps watching.
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(t.Context(), configMap("later"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fenced client reads a ConfigMap created after the fence failed", func(ctx context.Context) (bool, error) {
		err := fenced.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "later"}, &corev1.ConfigMap{})
		return err == nil, err
	})
	var list corev1.ConfigMapList
	if err := fenced.List(t.Context(), &list); err != nil || len(list.Items) < 2 {
		t.Errorf("List while fenced: %d items (%v), want the ConfigMaps", len(list.Items), err)
	}

	// A client of one's own, without a fence, shares the cache and writes.
	own, err := client.New(client.Options{Config: srv.Config(), Scheme: mgr.Scheme(), Mapper: mgr.RESTMapper(), Cache: mgr.Cache()})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Create(context.Background(), configMap("own")); err != nil {
		t.Errorf("a write through a client without a fence: %v", err)
	}
}

// Once a manager has lost its lease, its client refuses writes even on a
// context of the caller's own (context.Background()), with ErrNotLeader;
// its API reader still reads.
func TestManagerClientRefusesWritesOnceLeadershipIsLost(t *testing.T) {
	s := staticSiteScheme(t)
	srv := fake.Start(t, fake.Options{Scheme: s, Objects: []object.Object{configMap("seen")}})
	cs := kubernetes.NewForConfigOrDie(srv.Config())
	mgr := testenv.NewManager(t, srv.Config(), framework.Options{Scheme: s,
		LeaderElection: framework.LeaderElectionOptions{
			Enabled: true,
			ID:      "fenced",
			Lease:   lease.Options{Namespace: "kube-system", Identity: "victim", Duration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond},
		}})
	done := make(chan error, 1)
	go func() { done <- mgr.Start(t.Context()) }()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("Manager.Start returned before it was elected: %v", err)
	}
	if err := mgr.Client().Create(context.Background(), configMap("while-leading")); err != nil {
		t.Fatalf("a write while leading: %v", err)
	}
	eventually(t, "another process takes the lease", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "fenced", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To("thief"), ptr.To[int32](60)
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		_, err = cs.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
		return err == nil, err
	})
	if err := <-done; !errors.Is(err, framework.ErrLeaderElectionLost) {
		t.Fatalf("Manager.Start = %v, want ErrLeaderElectionLost", err)
	}
	err := mgr.Client().Create(context.Background(), configMap("after-loss"))
	if !errors.Is(err, framework.ErrNotLeader) {
		t.Errorf("a write after the lease was lost: got %v, want ErrNotLeader", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(t.Context(), "after-loss", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused write reached the server: %v", err)
	}
	if err := mgr.APIReader().Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "seen"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("a read through the API reader after the lease was lost: %v", err)
	}
}
