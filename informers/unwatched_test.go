package informers_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/sharding"
)

// readStarts records Options.OnUnwatchedRead's calls.
type readStarts struct {
	mu    sync.Mutex
	calls []informers.UnwatchedRead
}

func (r *readStarts) note(u informers.UnwatchedRead) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, u)
}

func (r *readStarts) all() []informers.UnwatchedRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]informers.UnwatchedRead(nil), r.calls...)
}

var secretKind = corev1.SchemeGroupVersion.WithKind("Secret")

func createSecret(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// With the option off (its zero value), a read of a kind no informer
// holds starts one and keeps it: the read answers, the informer is flagged
// as started by a read, and the hook hears of it once.
func TestUnwatchedReadStartsAnInformerByDefault(t *testing.T) {
	inBothForms(t, testUnwatchedReadStartsAnInformerByDefault)
}

func testUnwatchedReadStartsAnInformerByDefault(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	createSecret(t, cs, ns, "s")
	var heard readStarts
	c := started(t, admin, informers.Options{Namespace: ns, OnUnwatchedRead: heard.note})
	for range 2 {
		var s corev1.Secret
		if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "s"}, &s); err != nil {
			t.Fatalf("Get of an unwatched kind with the option off: %v", err)
		}
	}
	calls := heard.all()
	if len(calls) != 1 || calls[0].Kind != secretKind || calls[0].Mode != informers.Typed || !strings.HasPrefix(calls[0].Informer, "v1 Secret") {
		t.Errorf("OnUnwatchedRead heard %+v, want one typed v1 Secret for two reads", calls)
	}
	stats := c.Stats()
	if len(stats) != 1 || !stats[0].StartedByRead {
		t.Errorf("Stats %+v, want the one Secret informer, flagged as started by a read", stats)
	}
}

// wantNotWatched fails t unless err is the refusal of a read of kind in
// mode, naming both and the fixes.
func wantNotWatched(t *testing.T, what string, err error, kind, mode string) {
	t.Helper()
	if !errors.Is(err, informers.ErrNotWatched) {
		t.Errorf("%s: %v, want an error wrapping ErrNotWatched", what, err)
		return
	}
	for _, s := range []string{kind, " as " + mode + " objects", "RefuseUnwatchedReads", "Options.ByKind", "APIReader", "For, Owns or Watches"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

// With RefuseUnwatchedReads, reads of a kind no informer holds in the
// mode read fail at once naming the kind, the mode and the fixes, and
// start nothing; reads of watched kinds, and of kinds ByKind declares,
// work as before.
func TestRefuseUnwatchedReads(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	createSecret(t, cs, ns, "s")
	testenv.CreateConfigMap(t, cs, ns, "cm", nil)
	var heard readStarts
	podKind := schema.GroupKind{Kind: "Pod"}
	c := started(t, admin, informers.Options{Namespace: ns, RefuseUnwatchedReads: true, OnUnwatchedRead: heard.note,
		ByKind: map[schema.GroupKind]informers.Selection{podKind: {}}})
	key := types.NamespacedName{Namespace: ns, Name: "s"}

	// A metadata-only informer of Secrets: reading them as typed objects
	// would hold every Secret's data, the memory it was chosen to avoid.
	if _, err := informers.For[*metav1.PartialObjectMetadata](c, informers.Selection{Kind: secretKind}); err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(secretKind)
	if err := c.Get(t.Context(), key, meta); err != nil || meta.Name != "s" {
		t.Errorf("metadata Get of the watched mode = %v, %v; want the Secret's metadata", meta.Name, err)
	}
	wantNotWatched(t, "typed Get of a kind watched as metadata", c.Get(t.Context(), key, &corev1.Secret{}), "v1 Secret", "typed")
	wantNotWatched(t, "typed List of a kind watched as metadata", c.List(t.Context(), &corev1.SecretList{}), "v1 Secret", "typed")
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(secretKind)
	wantNotWatched(t, "unstructured Get of a kind watched as metadata", c.Get(t.Context(), key, u), "v1 Secret", "unstructured")
	r, err := informers.NewKindReader[object.Object](c, &corev1.Secret{}, secretKind)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Get(t.Context(), key)
	wantNotWatched(t, "KindReader Get of a kind watched as metadata", err, "v1 Secret", "typed")

	// A kind nothing watches, and a watched kind stopped since.
	wantNotWatched(t, "Get of a kind nothing watches", c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "cm"}, &corev1.ConfigMap{}), "v1 ConfigMap", "typed")
	cms, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "cm"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("Get of a kind watched since: %v", err)
	}
	cms.Stop()
	wantNotWatched(t, "Get of a kind whose informer stopped", c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "cm"}, &corev1.ConfigMap{}), "v1 ConfigMap", "typed")

	// A typed nil is refused for what it is, not for the kind.
	if err := c.Get(t.Context(), key, (*corev1.Secret)(nil)); err == nil || errors.Is(err, informers.ErrNotWatched) || !strings.Contains(err.Error(), "nil *v1.Secret") {
		t.Errorf("Get into a typed nil = %v, want the typed-nil error", err)
	}

	// A kind declared in ByKind but not watched yet: a read starts its
	// informer, flagged as such.
	var pods corev1.PodList
	if err := c.List(t.Context(), &pods); err != nil {
		t.Errorf("List of a kind declared in ByKind: %v", err)
	}
	calls := heard.all()
	if len(calls) != 1 || calls[0].Kind.Kind != "Pod" {
		t.Errorf("OnUnwatchedRead heard %+v, want only the declared Pods' informer", calls)
	}
	for _, st := range c.Stats() {
		if st.Kind.Kind == "Secret" && st.Mode != informers.Metadata {
			t.Errorf("a refused read left an informer: %+v", st)
		}
		if st.StartedByRead != (st.Kind.Kind == "Pod") {
			t.Errorf("%s: StartedByRead %v, want it only for the Pods' informer", st.Description, st.StartedByRead)
		}
	}
}

// Reads of a kind routed to held buckets never start an informer: with
// RefuseUnwatchedReads they read the held buckets as without it, and an
// object of a bucket not held is ErrNotCached, not ErrNotWatched.
func TestRefuseUnwatchedReadsOfARoutedKind(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	b := sharding.Buckets{By: sharding.ByNamespace, Count: 2}
	nsOf := map[int]string{}
	for n := 0; len(nsOf) < 2; n++ {
		ns := testenv.Namespace(t, cs, fmt.Sprint(n))
		if _, ok := nsOf[b.Of(ns)]; !ok {
			nsOf[b.Of(ns)] = ns
			testenv.CreateConfigMap(t, cs, ns, "a", nil)
		}
	}
	c := started(t, admin, informers.Options{RefuseUnwatchedReads: true})
	if err := hooks.RouteReads(c, &corev1.ConfigMap{}, informers.Selection{}, b, func() []int { return []int{1} }); err != nil {
		t.Fatal(err)
	}
	if _, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Shard: b.Selector(1)}); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: nsOf[1], Name: "a"}, &cm); err != nil {
		t.Errorf("Get in the held bucket: %v", err)
	}
	var list corev1.ConfigMapList
	if err := c.List(t.Context(), &list, informers.InNamespace(nsOf[1])); err != nil || len(list.Items) != 1 {
		t.Errorf("List in the held bucket = %d items, %v; want 1", len(list.Items), err)
	}
	err := c.Get(t.Context(), types.NamespacedName{Namespace: nsOf[0], Name: "a"}, &cm)
	if !errors.Is(err, informers.ErrNotCached) || errors.Is(err, informers.ErrNotWatched) {
		t.Errorf("Get in a bucket not held = %v, want ErrNotCached only", err)
	}
	if n := len(c.Stats()); n != 1 {
		t.Errorf("the cache holds %d informers, want the held bucket's only: %+v", n, c.Stats())
	}
}
