package informers_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// What a compact kind's readers, listeners and index functions are handed
// is an object of the kind's Go type (or unstructured), never the cache's record of it,
// even where the reader asks for any object.Object.
func TestCompactRecordsNeverReachReaders(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	for i := range 3 {
		testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%d", i), map[string]string{"k": "v"})
	}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	c := started(t, admin, informers.Options{Namespace: ns, Compact: map[schema.GroupKind]informers.CompactOptions{gk: {}}})

	var (
		mu   sync.Mutex
		seen []any
	)
	see := func(o any) {
		mu.Lock()
		seen = append(seen, o)
		mu.Unlock()
	}
	if err := c.AddIndex(gk, "k", func(o object.Object) []string { see(o); return []string{o.GetLabels()["k"]} }); err != nil {
		t.Fatal(err)
	}
	inf, err := informers.ForObject[object.Object](c, &corev1.ConfigMap{}, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddListener(informers.ListenerFuncs[object.Object]{AddFunc: func(o object.Object, _ bool) { see(o) }}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "cm-0"})
	if err != nil {
		t.Fatal(err)
	}
	see(got)
	listed, err := inf.List(t.Context(), informers.MatchingIndex("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 3 {
		t.Errorf("List by the index returned %d objects, want 3", len(listed))
	}
	for _, o := range listed {
		see(o)
	}
	kr, err := informers.NewKindReader[object.Object](c, &corev1.ConfigMap{}, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if err != nil {
		t.Fatal(err)
	}
	byKind, err := kr.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "cm-1"})
	if err != nil {
		t.Fatal(err)
	}
	see(byKind)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "cm-2"}, u); err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "cm-2" || u.GetLabels()["k"] != "v" {
		t.Errorf("unstructured Get of a compact kind = %v", u.Object)
	}
	eventually(t, "the listener hears of every ConfigMap", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 3+1+3+1+3
	})
	mu.Lock()
	defer mu.Unlock()
	// The index is the kind's, so it indexes the unstructured informer's
	// objects too.
	typed, untyped := reflect.TypeFor[*corev1.ConfigMap](), reflect.TypeFor[*unstructured.Unstructured]()
	for _, o := range seen {
		if rt := reflect.TypeOf(o); rt != typed && rt != untyped {
			t.Errorf("user code was handed a %T, want %v or %v", o, typed, untyped)
		}
	}
}

// A reader that changes an object it read from a compact kind changes
// nothing another reader sees: not the objects a Get of the Cache copies
// out, not objects sharing its labels, and not the index the cache keeps
// of them.
func TestCompactReadersChangingObjectsDoNotChangeTheCache(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", map[string]string{"app": "web"})
	testenv.CreateConfigMap(t, cs, ns, "b", map[string]string{"app": "web"})
	c := started(t, admin, informers.Options{Namespace: ns,
		Compact: map[schema.GroupKind]informers.CompactOptions{{Kind: "ConfigMap"}: {Decoded: -1}}})
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "a"}
	var copied corev1.ConfigMap
	if err := c.Get(t.Context(), key, &copied); err != nil {
		t.Fatal(err)
	}
	copied.Labels["app"] = "changed"
	copied.Data = map[string]string{"changed": "yes"}
	shared, err := inf.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	shared.Labels["app"] = "changed" // not allowed, but must not spread
	shared.Name = "changed"

	again, err := inf.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if again.Labels["app"] != "web" || again.Name != "a" || again.Data["changed"] != "" {
		t.Errorf("after readers changed the objects they read, Get = %s %v %v, want a with app=web and no change", again.Name, again.Labels, again.Data)
	}
	web, err := inf.List(t.Context(), informers.MatchingLabels(labels.SelectorFromSet(labels.Set{"app": "web"})))
	if err != nil {
		t.Fatal(err)
	}
	if len(web) != 2 {
		t.Errorf("List app=web after a reader changed an object's labels returned %d objects, want 2", len(web))
	}
}

// The negative control of the compact suites: records that lose their
// objects' labels break the readers that find objects by label (the
// declarative children index among them), and the checks those suites make
// see it.
func TestCompactRecordsWithoutLabelsAreSeen(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	gk := schema.GroupKind{Kind: "ConfigMap"}
	// None kept decoded: every read decodes the record.
	c := started(t, admin, informers.Options{Namespace: ns, Compact: map[schema.GroupKind]informers.CompactOptions{gk: {Decoded: -1}}})
	if err := c.AddIndex(gk, "parent", func(o object.Object) []string { return []string{o.GetLabels()["parent"]} }); err != nil {
		t.Fatal(err)
	}
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	informers.DropCompactLabels(c, gk)
	testenv.CreateConfigMap(t, cs, ns, "child", map[string]string{"parent": "p"})
	eventually(t, "the cache holds the child", func() bool { return inf.Contains(types.NamespacedName{Namespace: ns, Name: "child"}) })
	byIndex, err := inf.List(t.Context(), informers.MatchingIndex("parent", "p"))
	if err != nil {
		t.Fatal(err)
	}
	byLabel, err := inf.List(t.Context(), informers.MatchingLabels(labels.SelectorFromSet(labels.Set{"parent": "p"})))
	if err != nil {
		t.Fatal(err)
	}
	if len(byIndex) != 0 || len(byLabel) != 0 {
		t.Errorf("with records losing labels, the child was found by index (%d) or by label (%d): the compact suites could not see a record losing labels", len(byIndex), len(byLabel))
	}
}
