package envtest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestCompactEtcdExpiresOldWatches(t *testing.T) {
	t.Parallel()
	// Without the watch cache, watches go to etcd, which has forgotten compacted history.
	env, cfg := startEnv(t, envtest.Options{APIServerFlags: []string{"--watch-cache=false"}})
	ctx := t.Context()
	cms := clientset(t, cfg).CoreV1().ConfigMaps("default")

	first, err := cms.Create(ctx, configMap("default", "old", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	oldRV := first.ResourceVersion
	for i := range 3 {
		if _, err := cms.Create(ctx, configMap("default", fmt.Sprintf("newer-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}

	rev, err := env.CompactEtcd(ctx)
	if err != nil {
		t.Fatalf("CompactEtcd: %v", err)
	}
	t.Logf("compacted etcd at revision %d; watching from resourceVersion %s", rev, oldRV)

	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: oldRV})
	if err != nil {
		if !apierrors.IsGone(err) && !apierrors.IsResourceExpired(err) {
			t.Fatalf("watch from %s: %v, want 410 Gone", oldRV, err)
		}
		return
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		status, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || status.Code != http.StatusGone {
			t.Fatalf("first event of a watch from compacted %s: %s %v, want ERROR with 410 Gone", oldRV, ev.Type, ev.Object)
		}
		t.Logf("watch from %s: %d %s: %s", oldRV, status.Code, status.Reason, status.Message)
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s, want ERROR 410 Gone")
	}

	// Watching from now on still works.
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	w2, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from the current %s: %v", list.ResourceVersion, err)
	}
	w2.Stop()
}
