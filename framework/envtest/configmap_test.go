package envtest_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestConfigMapCreateListWatch(t *testing.T) {
	t.Parallel()
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	ctx := t.Context()
	ns := newNamespace(t, cs)
	cms := cs.CoreV1().ConfigMaps(ns)

	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from %s: %v", list.ResourceVersion, err)
	}
	defer w.Stop()

	created, err := cms.Create(ctx, configMap(ns, "greeting", map[string]string{"hello": "world"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed before the ADDED event")
		}
		if ev.Type != watch.Added {
			t.Fatalf("first event is %s %v, want ADDED", ev.Type, ev.Object)
		}
		if got := ev.Object.(metav1.Object); got.GetName() != "greeting" || got.GetUID() != created.UID {
			t.Errorf("ADDED %s (uid %s), want greeting (uid %s)", got.GetName(), got.GetUID(), created.UID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no ADDED event within 30s")
	}

	list, err = cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Data["hello"] != "world" {
		t.Errorf("list = %v, want the one greeting", list.Items)
	}
}
