package fake_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
)

func TestListSelectors(t *testing.T) {
	a, b := configMap("a"), configMap("b")
	a.Labels = map[string]string{"tier": "web"}
	other := configMap("a")
	other.Namespace = "other"
	cs, _ := clients(t, fake.Options{Objects: []object.Object{a, b, other}})
	ctx := t.Context()
	for _, tc := range []struct {
		ns, labels, fields string
		want               []string
	}{
		{ns: "", want: []string{"ns/a", "ns/b", "other/a"}},
		{ns: "ns", want: []string{"ns/a", "ns/b"}},
		{ns: "", labels: "tier=web", want: []string{"ns/a"}},
		{ns: "", labels: "tier!=web", want: []string{"ns/b", "other/a"}},
		{ns: "", fields: "metadata.name=a", want: []string{"ns/a", "other/a"}},
		{ns: "", fields: "metadata.namespace=other", want: []string{"other/a"}},
		{ns: "ns", fields: "metadata.name!=a", want: []string{"ns/b"}},
	} {
		list, err := cs.CoreV1().ConfigMaps(tc.ns).List(ctx, metav1.ListOptions{LabelSelector: tc.labels, FieldSelector: tc.fields})
		if err != nil {
			t.Errorf("list ns %q labels %q fields %q: %v", tc.ns, tc.labels, tc.fields, err)
			continue
		}
		var got []string
		for _, cm := range list.Items {
			got = append(got, cm.Namespace+"/"+cm.Name)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("list ns %q labels %q fields %q: got %v, want %v", tc.ns, tc.labels, tc.fields, got, tc.want)
		}
	}
	_, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "data.k=v"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "data.k") {
		t.Errorf("list by an unsupported field: got %v, want BadRequest naming it", err)
	}
}

// next returns the next event of w, failing the test after 10 s.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10 s")
	}
	return watch.Event{}
}

func eventName(e watch.Event) string {
	cm, ok := e.Object.(*corev1.ConfigMap)
	if !ok {
		return string(e.Type) + " " + e.Object.GetObjectKind().GroupVersionKind().Kind
	}
	return string(e.Type) + " " + cm.Name
}

// An empty server's list has a resourceVersion that a watch can start
// from, as a new etcd's does: a watch from "0" would mean "any version"
// and start with every object, none of them as a change made after it.
func TestAnEmptyServersListCanStartAWatch(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv := list.ResourceVersion; rv == "" || rv == "0" {
		t.Fatalf("an empty server listed at resourceVersion %q", rv)
	}
	if _, err := cms.Create(ctx, configMap("first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := next(t, w); eventName(e) != "ADDED first" {
		t.Fatalf("first event %s, want ADDED first", eventName(e))
	}
}

func TestWatchFromAResourceVersion(t *testing.T) {
	cs, _ := clients(t, fake.Options{Objects: []object.Object{configMap("before")}})
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("ns")
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Changes after the list but before the watch are delivered.
	if _, err := cms.Create(ctx, configMap("between"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := next(t, w); eventName(e) != "ADDED between" {
		t.Fatalf("first event %s, want ADDED between", eventName(e))
	}
	sel := configMap("selected")
	sel.Labels = map[string]string{"watch": "me"}
	if _, err := cms.Create(ctx, sel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ADDED selected", "DELETED before"} {
		if e := next(t, w); eventName(e) != want {
			t.Fatalf("event %s, want %s", eventName(e), want)
		}
	}

	// A watch by label sees an object leave its selection as a deletion.
	lw, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "watch=me", ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Stop()
	if e := next(t, lw); eventName(e) != "ADDED selected" {
		t.Fatalf("first event of the label watch %s, want ADDED selected", eventName(e))
	}
	if _, err := cms.Patch(ctx, "selected", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"watch":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := next(t, lw); eventName(e) != "DELETED selected" {
		t.Fatalf("event %s, want DELETED selected", eventName(e))
	}

	// A watch list (initial events, then a bookmark) ends its initial events with the annotation.
	wl, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Stop()
	for _, want := range []string{"ADDED between", "ADDED selected"} {
		if e := next(t, wl); eventName(e) != want {
			t.Fatalf("watch list event %s, want %s", eventName(e), want)
		}
	}
	mark := next(t, wl)
	if m, ok := mark.Object.(*corev1.ConfigMap); mark.Type != watch.Bookmark || !ok || m.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("after the initial events: %s %v, want a bookmark with %s", mark.Type, mark.Object, metav1.InitialEventsAnnotationKey)
	}
}

// The server answers in protobuf when asked for built-in kinds, in CBOR
// when asked for the others, in JSON otherwise.
func TestContentNegotiation(t *testing.T) {
	srv := fake.Start(t, fake.Options{Scheme: staticSiteScheme(t), Objects: []object.Object{configMap("cm")}})
	hc, err := rest.HTTPClientFor(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, accept, want string }{
		{"/api/v1/namespaces/ns/configmaps", "application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf"},
		{"/api/v1/namespaces/ns/configmaps", "application/json", "application/json"},
		{"/apis/example.converge.dev/v1alpha1/namespaces/ns/staticsites", "application/vnd.kubernetes.protobuf,application/json", "application/json"},
		{"/apis/example.converge.dev/v1alpha1/namespaces/ns/staticsites", "application/cbor;q=1,application/json;q=0.9", "application/cbor"},
		{"/apis/example.converge.dev/v1alpha1/namespaces/ns/staticsites?watch=true", "application/cbor;q=1,application/json;q=0.9", "application/cbor-seq"},
		{"/api/v1/namespaces/ns/configmaps", "application/cbor;q=1,application/json;q=0.9", "application/json"},
		{"/api/v1/namespaces/ns/configmaps?watch=true", "application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf;stream=watch"},
		{"/api/v1/namespaces/ns/configmaps/missing", "application/json", "application/json"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.Config().Host+tc.path, nil)
		req.Header.Set("Accept", tc.accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := resp.Header.Get("Content-Type"); got != tc.want {
			t.Errorf("GET %s with Accept %q: Content-Type %q, want %q", tc.path, tc.accept, got, tc.want)
		}
	}
}

func TestMetadataOnly(t *testing.T) {
	cm := configMap("cm", "secret", "value")
	srv := fake.Start(t, fake.Options{Objects: []object.Object{cm}})
	mc, err := metadata.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	got, err := mc.Resource(gvr).Namespace("ns").Get(t.Context(), "cm", metav1.GetOptions{})
	if err != nil || got.Name != "cm" || got.UID == "" {
		t.Fatalf("metadata get: %v, %v", got, err)
	}
	list, err := mc.Resource(gvr).Namespace("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("metadata list: %v, %v", list, err)
	}
	w, err := mc.Resource(gvr).Namespace("ns").Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cs, _ := kubernetes.NewForConfig(srv.Config())
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(t.Context(), configMap("later"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := next(t, w); e.Type != watch.Added || e.Object.(*metav1.PartialObjectMetadata).Name != "later" {
		t.Errorf("metadata watch event: %s %#v, want ADDED later", e.Type, e.Object)
	}
	hc, _ := rest.HTTPClientFor(srv.Config())
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.Config().Host+"/api/v1/namespaces/ns/configmaps/cm", nil)
	req.Header.Set("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "value") || !strings.Contains(string(body), `"kind":"PartialObjectMetadata"`) {
		t.Errorf("metadata-only answer: %s", body)
	}
}

func TestCloseEndsWatchesAndRequests(t *testing.T) {
	srv, err := fake.NewServer(fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mc, _ := metadata.NewForConfig(srv.Config())
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	w, err := mc.Resource(gvr).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Error("an event after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end 10 s after Close")
	}
	_, err = mc.Resource(gvr).List(t.Context(), metav1.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), fake.ErrClosed.Error()) {
		t.Errorf("list after Close: got %v, want %v", err, fake.ErrClosed)
	}
	srv.Close() // twice is fine
}
