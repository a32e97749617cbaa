package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

func TestGetAfterDeletingAnObjectAnotherProcessRecreated(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "phoenix", nil)
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns}})
	inf, err := informers.For[*corev1.ConfigMap](mgr.Cache(), informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	c := mgr.Client()
	key := types.NamespacedName{Namespace: ns, Name: "phoenix"}
	var got corev1.ConfigMap
	if err := c.Get(t.Context(), key, &got); err != nil {
		t.Fatal(err)
	}

	// The deletion names the object only: the UID that tells it from its
	// successor is the one the server's answer gives.
	if err := c.Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "phoenix"}}); err != nil {
		t.Fatal(err)
	}
	reborn := testenv.CreateConfigMap(t, cs, ns, "phoenix", nil) // another process
	seen := make(chan struct{})
	reg, err := inf.AddListener(informers.ListenerFuncs[*corev1.ConfigMap]{AddFunc: func(cm *corev1.ConfigMap, _ bool) {
		if cm.UID == reborn.UID {
			close(seen)
		}
	}}, cache.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inf.RemoveListener(reg) }()
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the cache never showed the re-created object")
	}

	start := time.Now()
	err = c.Get(t.Context(), key, &got)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Get after the deletion and a re-creation by another process = %v after %v, want the new object", err, took)
	}
	if got.UID != reborn.UID {
		t.Errorf("Get returned UID %s, want the re-created object's %s", got.UID, reborn.UID)
	}
	if took > 2*time.Second {
		t.Errorf("Get took %v: it waited for a deletion the cache had already shown", took)
	}
}

func TestClientListSeesOwnCreates(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns}})
	if _, err := informers.For[*corev1.ConfigMap](mgr.Cache(), informers.Selection{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	c := mgr.Client()
	for i := range 10 {
		name := "item-" + string(rune('a'+i))
		if err := c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		var list corev1.ConfigMapList
		if err := c.List(t.Context(), &list, informers.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != i+1 {
			t.Fatalf("List after %d creates shows %d objects", i+1, len(list.Items))
		}
	}
}

func TestAPIReaderReadsWithoutTheCache(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	cached, other := testenv.Namespace(t, cs, "cached"), testenv.Namespace(t, cs, "other")
	testenv.CreateConfigMap(t, cs, other, "a", map[string]string{"app": "web"})
	testenv.CreateConfigMap(t, cs, other, "b", map[string]string{"app": "db"})
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: cached}})
	testenv.StartManager(t, mgr)
	r := mgr.APIReader()
	ctx := t.Context()
	key := types.NamespacedName{Namespace: other, Name: "a"}

	// The cache holds another namespace: its reads fail, not with NotFound.
	var cm corev1.ConfigMap
	err := mgr.Client().Get(ctx, key, &cm)
	if !errors.Is(err, informers.ErrNotCached) || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "APIReader") {
		t.Fatalf("Client.Get outside the cached namespace = %v, want ErrNotCached pointing to APIReader", err)
	}
	statsBefore := len(mgr.Cache().Stats())

	if err := r.Get(ctx, key, &cm); err != nil || cm.Data["k"] != "a" || cm.Kind != "ConfigMap" {
		t.Fatalf("typed Get = %v, %+v", err, cm)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if err := r.Get(ctx, key, u); err != nil || u.GetName() != "a" || u.GetUID() != cm.UID {
		t.Fatalf("unstructured Get = %v, %v", err, u)
	}
	pm := &metav1.PartialObjectMetadata{}
	pm.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if err := r.Get(ctx, key, pm); err != nil || pm.UID != cm.UID || pm.Kind != "ConfigMap" {
		t.Fatalf("metadata Get = %v, %+v", err, pm)
	}
	var nsObj corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: other}, &nsObj); err != nil {
		t.Fatalf("Get of a cluster-scoped object: %v", err)
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: other, Name: "missing"}, &cm); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing object = %v, want NotFound", err)
	}

	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, informers.InNamespace(other), informers.MatchingLabels(web)); err != nil || len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Fatalf("typed List = %v, %d items", err, len(list.Items))
	}
	ul := &unstructured.UnstructuredList{}
	ul.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"})
	if err := r.List(ctx, ul, informers.InNamespace(other)); err != nil || len(ul.Items) < 2 {
		t.Fatalf("unstructured List = %v, %d items", err, len(ul.Items))
	}
	pl := &metav1.PartialObjectMetadataList{}
	pl.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"})
	if err := r.List(ctx, pl, informers.InNamespace(other), informers.MatchingLabels(web)); err != nil || len(pl.Items) != 1 || pl.Items[0].Name != "a" {
		t.Fatalf("metadata List = %v, %d items", err, len(pl.Items))
	}
	if err := r.List(ctx, &list, informers.MatchingIndex("owner", "x")); err == nil {
		t.Error("List with an index succeeded without a cache")
	}

	if n := len(mgr.Cache().Stats()); n != statsBefore {
		t.Errorf("APIReader reads created %d informers", n-statsBefore)
	}
}

func TestGetOfAKindTheIdentityMayNotListFailsFast(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "settings", nil)
	user, err := plane.Environment().AddUser(envtestUser("settings-getter"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Grant(t, cs, ns, "settings-getter", "configmaps", "get")
	mgr := testenv.NewManager(t, user, framework.Options{Cache: informers.Options{Namespace: ns}})
	testenv.StartManager(t, mgr)
	key := types.NamespacedName{Namespace: ns, Name: "settings"}

	start := time.Now()
	var cm corev1.ConfigMap
	err = mgr.Client().Get(t.Context(), key, &cm)
	took := time.Since(start)
	t.Logf("Client.Get took %v: %v", took.Round(time.Millisecond), err)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "list and watch") || !strings.Contains(err.Error(), "APIReader") {
		t.Fatalf("Client.Get = %v, want a forbidden error saying the identity may not list and watch, pointing to APIReader", err)
	}
	if took > 30*time.Second {
		t.Errorf("Client.Get took %v: it waited for the sync timeout", took)
	}
	if err := mgr.APIReader().Get(t.Context(), key, &cm); err != nil {
		t.Fatalf("APIReader.Get with get permission: %v", err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return mgr.Cache().Health() == nil, nil
	})
	if err != nil {
		t.Fatalf("readiness stays false after the failed read: %v", mgr.Cache().Health())
	}
}

// A pod being deleted gracefully has a deletion timestamp and no finalizers
// until its kubelet confirms the termination: a write to it in that time
// (a label, a status) leaves it in place, and a read after the write shows
// it rather than waiting for a deletion that has not happened.
func TestReadAfterWritingAGracefullyTerminatingPod(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	// A pod bound to a node no kubelet runs: its deletion waits for ever.
	pod, err := cs.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "terminating"},
		Spec: corev1.PodSpec{
			NodeName:   "no-kubelet",
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns, ReadYourWritesTimeout: 2 * time.Second}})
	if _, err := informers.For[*corev1.Pod](mgr.Cache(), informers.Selection{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	c := mgr.Client()
	key := types.NamespacedName{Namespace: ns, Name: pod.Name}
	var got corev1.Pod
	if err := c.Get(t.Context(), key, &got); err != nil {
		t.Fatal(err)
	}
	if got.DeletionTimestamp == nil || len(got.Finalizers) != 0 {
		t.Fatalf("pod has deletionTimestamp %v and finalizers %v, want a graceful deletion without finalizers", got.DeletionTimestamp, got.Finalizers)
	}

	patch := []byte(`{"metadata":{"labels":{"seen":"yes"}}}`)
	if err := c.Patch(t.Context(), &got, types.MergePatchType, patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), key, &got); err != nil {
		t.Fatalf("Get after a write to a terminating pod = %v, want the pod", err)
	}
	if got.Labels["seen"] != "yes" {
		t.Errorf("Get after the write returned labels %v, want the write's", got.Labels)
	}
	var list corev1.PodList
	if err := c.List(t.Context(), &list, informers.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Errorf("List after a write to a terminating pod = %d pods, %v; want the pod", len(list.Items), err)
	}
}
