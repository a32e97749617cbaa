package fake_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
)

var staticSites = schema.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Resource: "staticsites"}

// clients returns a clientset and a dynamic client of a server holding objs.
func clients(t *testing.T, opts fake.Options) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	if opts.Scheme == nil {
		opts.Scheme = staticSiteScheme(t)
	}
	srv := fake.Start(t, opts)
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs, dc
}

func configMap(name string, data ...string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{}}
	for i := 0; i+1 < len(data); i += 2 {
		cm.Data[data[i]] = data[i+1]
	}
	return cm
}

func rv(t *testing.T, obj metav1.Object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of %s: %v", obj.GetResourceVersion(), obj.GetName(), err)
	}
	return n
}

func TestCreateSetsIdentityAndRejectsADuplicate(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	a, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.UID == "" || a.CreationTimestamp.IsZero() || a.Generation != 0 || a.ResourceVersion == "" {
		t.Errorf("created object lacks uid, creationTimestamp or resourceVersion, or has a generation (a ConfigMap keeps none): %+v", a.ObjectMeta)
	}
	b, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("b"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv(t, b) <= rv(t, a) || b.UID == a.UID {
		t.Errorf("second object: resourceVersion %s (first %s), uid %s (first %s): want a larger version and another uid", b.ResourceVersion, a.ResourceVersion, b.UID, a.UID)
	}
	_, err = cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("a"), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) || !strings.Contains(err.Error(), `configmaps "a" already exists`) {
		t.Errorf("second create of ns/a: got %v, want AlreadyExists naming it", err)
	}
	_, err = cs.CoreV1().ConfigMaps("ns").Get(ctx, "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("get of a missing object: got %v, want NotFound naming it", err)
	}
	_, err = cs.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("create without a name: got %v, want Invalid naming metadata.name", err)
	}
	gen, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
	if err != nil || !strings.HasPrefix(gen.Name, "gen-") || len(gen.Name) != len("gen-")+5 {
		t.Errorf("create with generateName: got %v, %v", gen, err)
	}
}

// A stale update conflicts, as optimistic concurrency requires.
func TestStaleUpdateConflicts(t *testing.T) {
	cs, _ := clients(t, fake.Options{Objects: []object.Object{configMap("cm", "k", "v0")}})
	ctx := t.Context()
	stale, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := stale.DeepCopy()
	first.Data["k"] = "v1"
	updated, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, first, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv(t, updated) <= rv(t, stale) {
		t.Errorf("resourceVersion went from %s to %s: want it to grow", stale.ResourceVersion, updated.ResourceVersion)
	}
	stale.Data["k"] = "v2"
	_, err = cs.CoreV1().ConfigMaps("ns").Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `configmaps "cm"`) {
		t.Fatalf("update with stale resourceVersion %s: got %v, want a Conflict naming the object", stale.ResourceVersion, err)
	}
	got, _ := cs.CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{})
	if got.Data["k"] != "v1" {
		t.Errorf("after the conflict data is %v, want the first update's", got.Data)
	}
	// An update that changes nothing keeps the resourceVersion.
	same, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || same.ResourceVersion != got.ResourceVersion {
		t.Errorf("no-op update: resourceVersion %s → %s (%v), want unchanged", got.ResourceVersion, same.ResourceVersion, err)
	}
}

func TestGenerationFollowsTheSpecOnly(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	d, err := cs.AppsV1().Deployments("ns").Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Labels = map[string]string{"a": "b"}
	if d, err = cs.AppsV1().Deployments("ns").Update(ctx, d, metav1.UpdateOptions{}); err != nil || d.Generation != 1 {
		t.Fatalf("metadata-only update: generation %d (%v), want 1", d.Generation, err)
	}
	d.Status.Replicas = 3
	if d, err = cs.AppsV1().Deployments("ns").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil || d.Generation != 1 {
		t.Fatalf("status update: generation %d (%v), want 1", d.Generation, err)
	}
	d.Spec.Replicas = ptr.To[int32](2)
	if d, err = cs.AppsV1().Deployments("ns").Update(ctx, d, metav1.UpdateOptions{}); err != nil || d.Generation != 2 {
		t.Fatalf("spec update: generation %d (%v), want 2", d.Generation, err)
	}
}

func unstructuredSite(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("StaticSite"))
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

func TestStatusSubresource(t *testing.T) {
	_, dc := clients(t, fake.Options{})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	u := unstructuredSite("s")
	_ = unstructured.SetNestedField(u.Object, "nginx", "spec", "image")
	_ = unstructured.SetNestedField(u.Object, "http://created", "status", "url")
	u, err := sites.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(u.Object, "status", "url"); found {
		t.Errorf("create kept the status: %v", u.Object["status"])
	}
	_ = unstructured.SetNestedField(u.Object, "http://main", "status", "url")
	_ = unstructured.SetNestedField(u.Object, "caddy", "spec", "image")
	if u, err = sites.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if url, _, _ := unstructured.NestedString(u.Object, "status", "url"); url != "" {
		t.Errorf("an update of the main resource wrote the status: url %q", url)
	}
	_ = unstructured.SetNestedField(u.Object, "http://status", "status", "url")
	_ = unstructured.SetNestedField(u.Object, "httpd", "spec", "image")
	if u, err = sites.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	url, _, _ := unstructured.NestedString(u.Object, "status", "url")
	image, _, _ := unstructured.NestedString(u.Object, "spec", "image")
	if url != "http://status" || image != "caddy" {
		t.Errorf("after a status update: url %q, image %q; want the status written and the spec ignored", url, image)
	}

	// Declared without a status subresource, the status is part of the object.
	_, dc = clients(t, fake.Options{NoStatusSubresource: []object.Object{&v1alpha1.StaticSite{}}})
	v := unstructuredSite("s")
	_ = unstructured.SetNestedField(v.Object, "http://created", "status", "url")
	if v, err = dc.Resource(staticSites).Namespace("ns").Create(ctx, v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if url, _, _ := unstructured.NestedString(v.Object, "status", "url"); url != "http://created" {
		t.Errorf("without a status subresource create dropped the status: url %q", url)
	}
	if _, err := dc.Resource(staticSites).Namespace("ns").UpdateStatus(ctx, v, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("status update of a kind without the subresource: got %v, want NotFound", err)
	}
}

func TestFinalizersHoldADeletion(t *testing.T) {
	cm := configMap("held")
	cm.Finalizers = []string{"example.com/hold"}
	cs, _ := clients(t, fake.Options{Objects: []object.Object{cm}})
	ctx := t.Context()
	if err := cs.CoreV1().ConfigMaps("ns").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "held", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("after delete with a finalizer: %v, deletionTimestamp %v; want the object, terminating", err, got.GetDeletionTimestamp())
	}
	added := got.DeepCopy()
	added.Finalizers = append(added.Finalizers, "example.com/late")
	_, err = cs.CoreV1().ConfigMaps("ns").Update(ctx, added, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "example.com/late") {
		t.Errorf("adding a finalizer to a terminating object: got %v, want Invalid naming it", err)
	}
	got.Finalizers = nil
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the last finalizer is removed: got %v, want NotFound", err)
	}
}

func owned(name string, owner metav1.Object, finalizers ...string) *corev1.ConfigMap {
	cm := configMap(name)
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
	cm.Finalizers = finalizers
	return cm
}

func TestGarbageCollection(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	parent, err := cms.Create(ctx, configMap("parent"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child, err := cms.Create(ctx, owned("child", parent), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, owned("grandchild", child), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, owned("held", parent, "example.com/hold"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, _ := cms.Create(ctx, configMap("other"), metav1.CreateOptions{})
	shared := owned("shared", parent)
	shared.OwnerReferences = append(shared.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: other.UID})
	if _, err := cms.Create(ctx, shared, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := cms.Delete(ctx, "parent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"parent", "child", "grandchild"} {
		if _, err := cms.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s after its owner's deletion: got %v, want NotFound", name, err)
		}
	}
	held, err := cms.Get(ctx, "held", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Errorf("a dependent with a finalizer: %v, deletionTimestamp %v; want it terminating", err, held.GetDeletionTimestamp())
	}
	s, err := cms.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != other.UID {
		t.Errorf("a dependent with another owner: %v, owners %v; want it kept with the other owner only", err, s.GetOwnerReferences())
	}

	// Orphaning keeps the dependents and drops their reference.
	p2, _ := cms.Create(ctx, configMap("p2"), metav1.CreateOptions{})
	if _, err := cms.Create(ctx, owned("c2", p2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "p2", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	if c2, err := cms.Get(ctx, "c2", metav1.GetOptions{}); err != nil || len(c2.OwnerReferences) != 0 {
		t.Errorf("orphaned dependent: %v, owners %v; want it kept without owner", err, c2.GetOwnerReferences())
	}
}

// A parent with a finalizer someone else owns stays Terminating with its
// children when deleted.
func TestDeletingAParentWithAForeignFinalizerLeavesItTerminating(t *testing.T) {
	parent := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "site", Finalizers: []string{"other.example.com/backup"}}}
	cs, dc := clients(t, fake.Options{Objects: []object.Object{parent}})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	live, err := sites.Get(ctx, "site", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := configMap("child")
	child.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "StaticSite", Name: "site", UID: live.GetUID(), Controller: ptr.To(true)}}
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sites.Delete(ctx, "site", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second delete changes nothing
		got, err := sites.Get(ctx, "site", metav1.GetOptions{})
		if err != nil || got.GetDeletionTimestamp() == nil {
			t.Fatalf("parent after delete: %v, deletionTimestamp %v; want it terminating", err, got.GetDeletionTimestamp())
		}
		if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "child", metav1.GetOptions{}); err != nil {
			t.Errorf("the child of a terminating parent: %v, want it kept", err)
		}
		if err := sites.Delete(ctx, "site", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewServerRejectsBadOptions(t *testing.T) {
	var typedNil *corev1.ConfigMap
	_, err := fake.NewServer(fake.Options{Objects: []object.Object{configMap("ok"), typedNil}})
	if err == nil || !strings.Contains(err.Error(), "Options.Objects[1] is nil (*v1.ConfigMap)") {
		t.Errorf("typed nil object: got %v, want an error naming Options.Objects[1] and its type", err)
	}
	_, err = fake.NewServer(fake.Options{Objects: []object.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "no-namespace"}}}})
	if err == nil || !strings.Contains(err.Error(), "metadata.namespace") || !strings.Contains(err.Error(), "no-namespace") {
		t.Errorf("namespaced object without namespace: got %v, want an error naming it and metadata.namespace", err)
	}
	_, err = fake.NewServer(fake.Options{Objects: []object.Object{&v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}}})
	if err == nil || !strings.Contains(err.Error(), "StaticSite") {
		t.Errorf("object of a kind the scheme lacks: got %v, want an error naming the kind", err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		t.Logf("(an API status: %v)", status.Status().Reason)
	}
}

// Objects may be seeded terminating, with a finalizer.
func TestSeedingATerminatingObject(t *testing.T) {
	now := metav1.Now()
	held := configMap("held")
	held.DeletionTimestamp, held.Finalizers = &now, []string{"example.com/hold"}
	cs, _ := clients(t, fake.Options{Objects: []object.Object{held}})
	got, err := cs.CoreV1().ConfigMaps("ns").Get(t.Context(), "held", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Errorf("seeded terminating object: %v, deletionTimestamp %v", err, got.GetDeletionTimestamp())
	}

	gone := configMap("gone")
	gone.DeletionTimestamp = &now
	_, err = fake.NewServer(fake.Options{Objects: []object.Object{gone}})
	if err == nil || !strings.Contains(err.Error(), "deletionTimestamp") || !strings.Contains(err.Error(), "gone") {
		t.Errorf("seeded deleting object without finalizer: got %v, want an error naming it and deletionTimestamp", err)
	}
}

func TestDeleteCollectionAndPreconditions(t *testing.T) {
	a, b, c := configMap("a"), configMap("b"), configMap("c")
	a.Labels = map[string]string{"app": "x"}
	b.Labels = map[string]string{"app": "x"}
	cs, _ := clients(t, fake.Options{Objects: []object.Object{a, b, c}})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	got, _ := cms.Get(ctx, "c", metav1.GetOptions{})
	err := cms.Delete(ctx, "c", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("someone-else"))}})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), string(got.UID)) {
		t.Errorf("delete with a foreign UID precondition: got %v, want a Conflict naming the UIDs", err)
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=x"}); err != nil {
		t.Fatal(err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "c" {
		t.Errorf("after deleting app=x: %v, %v; want c only", list, err)
	}
}

func TestScopes(t *testing.T) {
	cs, dc := clients(t, fake.Options{ClusterScoped: []object.Object{&v1alpha1.StaticSite{}}})
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create a Namespace (a built-in cluster-scoped kind): %v", err)
	}
	site := unstructuredSite("cluster-wide")
	site.SetNamespace("")
	if _, err := dc.Resource(staticSites).Create(ctx, site, metav1.CreateOptions{}); err != nil {
		t.Errorf("create a StaticSite declared cluster-scoped: %v", err)
	}
	if _, err := dc.Resource(staticSites).Namespace("ns").Get(ctx, "cluster-wide", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get a cluster-scoped kind in a namespace: got %v, want NotFound", err)
	}
}

// A foreground deletion deletes the dependents before the owner.
func TestForegroundDeletion(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	parent, _ := cms.Create(ctx, configMap("parent"), metav1.CreateOptions{})
	if _, err := cms.Create(ctx, owned("child", parent), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: parent.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := next(t, w); eventName(e) != "ADDED child" {
		t.Fatalf("event %s, want ADDED child", eventName(e))
	}
	if err := cms.Delete(ctx, "parent", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DELETED child", "DELETED parent"} {
		if e := next(t, w); eventName(e) != want {
			t.Fatalf("event %s, want %s", eventName(e), want)
		}
	}
}

// A dependent written after its owner is gone is collected, as kube's
// garbage collector collects it shortly after: deleted when no owner is
// left, else stripped of the dangling reference. The write is answered
// with the object as written.
func TestADependentOfAGoneOwnerIsCollectedAfterItsWrite(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	parent, err := cms.Create(ctx, configMap("parent"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "parent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Create(ctx, owned("late", parent), metav1.CreateOptions{})
	if err != nil || got.Name != "late" {
		t.Fatalf("create of a dependent of a gone owner: %v, %v", got, err)
	}
	if _, err := cms.Get(ctx, "late", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a dependent created after its owner's deletion: got %v, want NotFound", err)
	}

	// An update that adds a reference to a gone owner: the same.
	kept, _ := cms.Create(ctx, configMap("kept"), metav1.CreateOptions{})
	kept.OwnerReferences = owned("x", parent).OwnerReferences
	if _, err := cms.Update(ctx, kept, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "kept", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a dependent updated to a gone owner: got %v, want NotFound", err)
	}

	// With another owner that exists, only the dangling reference goes.
	other, _ := cms.Create(ctx, configMap("other"), metav1.CreateOptions{})
	shared := owned("shared", parent)
	shared.OwnerReferences = append(shared.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: other.UID})
	if _, err := cms.Create(ctx, shared, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := cms.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != other.UID {
		t.Errorf("a dependent with another owner: %v, owners %v; want it kept with the other owner only", err, s.GetOwnerReferences())
	}
}
