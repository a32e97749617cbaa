package informers_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/sharding"
)

// byLabel indexes objects by their label k.
func byLabel(obj object.Object) []string {
	if v := obj.GetLabels()["k"]; v != "" {
		return []string{v}
	}
	return nil
}

// names returns the sorted names of objs.
func names[T object.Object](objs []T) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	slices.Sort(out)
	return out
}

// An index of a kind reaches every informer of the kind: those there
// already and those made later, whatever their selection (a bucket's, say).
func TestCacheAddIndex(t *testing.T) { inBothForms(t, testCacheAddIndex) }

func testCacheAddIndex(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	var cms []*corev1.ConfigMap
	for i := range 6 {
		cms = append(cms, testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%d", i), map[string]string{"k": fmt.Sprint(i % 2)}))
	}
	c := started(t, admin, informers.Options{Namespace: ns})
	gk := schema.GroupKind{Kind: "ConfigMap"}
	before, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddIndex(gk, "label.k", byLabel); err != nil {
		t.Fatal(err)
	}
	b := sharding.Buckets{By: sharding.ByUID, Count: 2}
	after, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Shard: b.Selector(0)})
	if err != nil {
		t.Fatal(err)
	}
	all, err := before.List(t.Context(), informers.MatchingIndex("label.k", "1"))
	if err != nil {
		t.Fatalf("List by the index on an informer made before AddIndex: %v", err)
	}
	if got := names(all); !slices.Equal(got, []string{"cm-1", "cm-3", "cm-5"}) {
		t.Errorf("List by the index = %v, want cm-1, cm-3, cm-5", got)
	}
	part, err := after.List(t.Context(), informers.MatchingIndex("label.k", "1"))
	if err != nil {
		t.Fatalf("List by the index on a bucket's informer made after AddIndex: %v", err)
	}
	var want []string
	for _, cm := range cms {
		if cm.Labels["k"] == "1" && b.OfObject(cm) == 0 {
			want = append(want, cm.Name)
		}
	}
	slices.Sort(want)
	if got := names(part); !slices.Equal(got, want) {
		t.Errorf("List by the index on bucket 0 = %v, want the k=1 objects of bucket 0: %v", got, want)
	}

	if err := c.AddIndex(gk, "label.k", byLabel); !errors.Is(err, informers.ErrIndexExists) {
		t.Errorf("AddIndex of the same name again: %v, want ErrIndexExists", err)
	}
	if err := before.AddIndex("label.k", func(*corev1.ConfigMap) []string { return nil }); !errors.Is(err, informers.ErrIndexExists) {
		t.Errorf("Informer.AddIndex of a name the kind has: %v, want ErrIndexExists", err)
	}
	if err := before.AddIndex("mine", func(*corev1.ConfigMap) []string { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.AddIndex(gk, "mine", byLabel); !errors.Is(err, informers.ErrIndexExists) || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("AddIndex of a name one informer has: %v, want ErrIndexExists naming it", err)
	}
	if err := c.AddIndex(gk, "nil", nil); err == nil {
		t.Error("AddIndex with a nil function succeeded")
	}
	// The cache's own index of namespaces, which lists in one namespace
	// read, is not replaced, even for a kind with no informer yet.
	if err := c.AddIndex(schema.GroupKind{Kind: "Secret"}, "namespace", byLabel); !errors.Is(err, informers.ErrIndexExists) {
		t.Errorf("AddIndex of the name of the cache's namespace index = %v, want ErrIndexExists", err)
	}
}

// A KindReader reads the kind's held buckets while routeReads routes the
// kind, and the informer of the whole kind as soon as one exists (someone
// reads the whole kind): that informer holds every bucket's objects.
func TestKindReaderFollowsTheRoute(t *testing.T) { inBothForms(t, testKindReaderFollowsTheRoute) }

func testKindReaderFollowsTheRoute(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	b := sharding.Buckets{By: sharding.ByNamespace, Count: 3}
	nsOf := map[int]string{}
	for n := 0; len(nsOf) < 3; n++ {
		ns := testenv.Namespace(t, cs, fmt.Sprint(n))
		if _, ok := nsOf[b.Of(ns)]; !ok {
			nsOf[b.Of(ns)] = ns
			testenv.CreateConfigMap(t, cs, ns, "a", map[string]string{"k": "x"})
		}
	}
	c := started(t, admin, informers.Options{})
	gk := schema.GroupKind{Kind: "ConfigMap"}
	if err := c.AddIndex(gk, "label.k", byLabel); err != nil {
		t.Fatal(err)
	}
	r, err := informers.NewKindReader[object.Object](c, &corev1.ConfigMap{}, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	if _, sharded := hooks.Routed(r); sharded {
		t.Error("Routed before RouteReads")
	}
	if err := hooks.RouteReads(c, &corev1.ConfigMap{}, informers.Selection{}, b, func() []int { return []int{1} }); err != nil {
		t.Fatal(err)
	}
	if _, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Shard: b.Selector(1)}); err != nil {
		t.Fatal(err)
	}
	if got, sharded := hooks.Routed(r); !sharded || got != b {
		t.Errorf("Routed = %v, %v after RouteReads, want %v, true", got, sharded, b)
	}
	obj, err := r.Get(t.Context(), types.NamespacedName{Namespace: nsOf[1], Name: "a"})
	if err != nil || obj.GetNamespace() != nsOf[1] {
		t.Errorf("Get in the held bucket = %v, %v", obj, err)
	}
	if _, err := r.Get(t.Context(), types.NamespacedName{Namespace: nsOf[0], Name: "a"}); !errors.Is(err, informers.ErrNotCached) {
		t.Errorf("Get in an unheld bucket = %v, want ErrNotCached", err)
	}
	objs, err := r.List(t.Context(), informers.MatchingIndex("label.k", "x"), informers.InNamespace(nsOf[1]))
	if err != nil || len(objs) != 1 {
		t.Errorf("List by index in the held namespace = %d objects, %v; want 1", len(objs), err)
	}
	for _, s := range c.Stats() {
		if !strings.Contains(s.Description, " in shard ") {
			t.Errorf("the routed reads made an informer %q outside the buckets", s.Description)
		}
	}

	// Reads in another mode are not routed: they make an informer of their
	// own mode, as without a route.
	var metaList metav1.PartialObjectMetadataList
	metaList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(t.Context(), &metaList, informers.InNamespace(nsOf[0])); err != nil || len(metaList.Items) != 1 {
		t.Errorf("List of metadata in an unheld bucket's namespace = %d items, %v; want 1 (not routed)", len(metaList.Items), err)
	}
	if _, sharded := hooks.Routed(r); !sharded {
		t.Error("a metadata informer of the kind turned the typed route off")
	}
	if _, err := r.Get(t.Context(), types.NamespacedName{Namespace: nsOf[0], Name: "a"}); !errors.Is(err, informers.ErrNotCached) {
		t.Errorf("typed Get in an unheld bucket with a metadata informer of the whole kind = %v, want ErrNotCached", err)
	}

	// Someone reads the whole kind: reads go to that informer.
	whole, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := whole.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, sharded := hooks.Routed(r); !sharded {
		t.Error("not Routed once an informer of the whole kind exists: the kind is still read per bucket")
	}
	if _, err := r.Get(t.Context(), types.NamespacedName{Namespace: nsOf[0], Name: "a"}); err != nil {
		t.Errorf("Get of another bucket's object with the whole kind cached: %v", err)
	}
	objs, err = r.List(t.Context(), informers.MatchingIndex("label.k", "x"))
	if err != nil || len(objs) < 3 {
		t.Errorf("List by index of the whole kind = %d objects, %v; want at least 3", len(objs), err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: nsOf[2], Name: "a"}, &cm); err != nil {
		t.Errorf("Cache.Get of another bucket's object with the whole kind cached: %v", err)
	}

	// The reader hands out the cached object itself, as an Informer does.
	got, err := r.Get(t.Context(), types.NamespacedName{Namespace: nsOf[2], Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	same, err := whole.Get(t.Context(), types.NamespacedName{Namespace: nsOf[2], Name: "a"})
	if err != nil || got != object.Object(same) {
		t.Errorf("KindReader.Get returned a copy (%p), want the cached object (%p)", got, same)
	}
	if sel := r.Selection(); sel.Kind.Kind != "ConfigMap" || sel.Namespace != "" {
		t.Errorf("Selection = %+v, want the kind's default", sel)
	}
}

// A KindReader of a kind narrowed by labels (Options.ByKind) answers a miss
// as Cache.Get does: NotFound when the object does not exist, and
// ErrNotCached when it exists outside the selection.
func TestKindReaderConfirmsAMissOutsideTheSelection(t *testing.T) {
	inBothForms(t, testKindReaderConfirmsAMissOutsideTheSelection)
}

func testKindReaderConfirmsAMissOutsideTheSelection(t *testing.T) {
	ns, c := webOnly(t)
	r, err := informers.NewKindReader[*corev1.ConfigMap](c, &corev1.ConfigMap{}, schema.GroupVersionKind{})
	if err != nil {
		t.Fatal(err)
	}
	if cm, err := r.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "web"}); err != nil || cm.Name != "web" {
		t.Errorf("Get of a selected object = %v, %v", cm, err)
	}
	if _, err := r.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "db"}); !errors.Is(err, informers.ErrNotCached) || apierrors.IsNotFound(err) {
		t.Errorf("Get of an object outside the selection = %v, want ErrNotCached", err)
	}
	if _, err := r.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "none"}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of an object that does not exist = %v, want NotFound", err)
	}
}
