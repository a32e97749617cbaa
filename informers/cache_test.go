package informers_test

import (
	"context"
	"errors"
	"slices"
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
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// started returns a running cache for cfg, stopped when t ends.
func started(t *testing.T, cfg *rest.Config, opts informers.Options) *informers.Cache {
	t.Helper()
	if compactForm(t) {
		opts = compactOptions(opts)
	}
	c, err := informers.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return c
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestOneWatchPerSelection(t *testing.T) { inBothForms(t, testOneWatchPerSelection) }

func testOneWatchPerSelection(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", nil)

	var log requestLog
	c := started(t, log.wrap(admin), informers.Options{Namespace: ns})
	// Ten readers of one kind and selection: one informer.
	for i := range 10 {
		inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}); err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	var viaClient corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}, &viaClient); err != nil {
		t.Fatal(err)
	}
	reqs := log.matching("/namespaces/" + ns + "/configmaps")
	// One reflector makes one initial list (a streaming watch-list, or a LIST
	// when the server refuses streaming) and then one watch.
	if len(reqs) == 0 || len(reqs) > 2 {
		t.Fatalf("got %d requests for configmaps, want one informer's 1-2: %+v", len(reqs), reqs)
	}
	for _, r := range reqs {
		if !strings.Contains(r.accept, "application/vnd.kubernetes.protobuf") {
			t.Errorf("configmaps request %s?%s accepts %q, want protobuf", r.path, r.query, r.accept)
		}
	}
	if got := len(c.Stats()); got != 1 {
		t.Errorf("cache runs %d informers, want 1: %v", got, c.Stats())
	}

	// Another selection is another informer.
	if _, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Labels: labels.SelectorFromSet(labels.Set{"x": "y"})}); err != nil {
		t.Fatal(err)
	}
	if got := len(c.Stats()); got != 2 {
		t.Errorf("cache runs %d informers after a second selection, want 2: %v", got, c.Stats())
	}
}

func TestModesAndManagedFields(t *testing.T) { inBothForms(t, testModesAndManagedFields) }

func testModesAndManagedFields(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", map[string]string{"app": "x"})
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

	c := started(t, admin, informers.Options{Namespace: ns})
	typed, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	un, err := informers.For[*unstructured.Unstructured](c, informers.Selection{Kind: gvk})
	if err != nil {
		t.Fatal(err)
	}
	md, err := informers.For[*metav1.PartialObjectMetadata](c, informers.Selection{Kind: gvk})
	if err != nil {
		t.Fatal(err)
	}
	tobj, err := typed.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if tobj.Data["k"] != "a" || len(tobj.ManagedFields) != 0 {
		t.Errorf("typed: data %v, managedFields %d; want data and no managedFields", tobj.Data, len(tobj.ManagedFields))
	}
	uobj, err := un.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(uobj.Object, "data", "k"); v != "a" || len(uobj.GetManagedFields()) != 0 {
		t.Errorf("unstructured: data.k %q, managedFields %d", v, len(uobj.GetManagedFields()))
	}
	mobj, err := md.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if mobj.Labels["app"] != "x" || len(mobj.ManagedFields) != 0 {
		t.Errorf("metadata: labels %v, managedFields %d", mobj.Labels, len(mobj.ManagedFields))
	}

	kept := started(t, admin, informers.Options{Namespace: ns, KeepManagedFields: true})
	kinf, err := informers.For[*corev1.ConfigMap](kept, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	kobj, err := kinf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(kobj.ManagedFields) == 0 {
		t.Error("KeepManagedFields: managedFields were stripped")
	}
}

func TestReaderQueries(t *testing.T) { inBothForms(t, testReaderQueries) }

func testReaderQueries(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns1, ns2 := testenv.Namespace(t, cs, "1"), testenv.Namespace(t, cs, "2")
	testenv.CreateConfigMap(t, cs, ns1, "a", map[string]string{"tier": "web"})
	testenv.CreateConfigMap(t, cs, ns1, "b", map[string]string{"tier": "db"})
	testenv.CreateConfigMap(t, cs, ns2, "a", map[string]string{"tier": "web"})

	c := started(t, admin, informers.Options{})
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndex("data.k", func(cm *corev1.ConfigMap) []string { return []string{cm.Data["k"]} }); err != nil {
		t.Fatal(err)
	}
	var example object.Object = &corev1.ConfigMap{} // as packages that hold kinds unknown at compile time do
	other, err := informers.ForObject(c, example, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.AddIndex("data.k", func(object.Object) []string { return nil }); !errors.Is(err, informers.ErrIndexExists) {
		t.Errorf("AddIndex of a name another handle added: %v, want ErrIndexExists", err)
	}
	names := func(opts ...informers.ListOption) []string {
		t.Helper()
		objs, err := inf.List(t.Context(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			if o.Namespace == ns1 || o.Namespace == ns2 {
				out = append(out, o.Namespace+"/"+o.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	web := labels.SelectorFromSet(labels.Set{"tier": "web"})
	for _, tc := range []struct {
		name string
		opts []informers.ListOption
		want []string
	}{
		{"all", nil, []string{ns1 + "/a", ns1 + "/b", ns2 + "/a"}},
		{"namespace", []informers.ListOption{informers.InNamespace(ns1)}, []string{ns1 + "/a", ns1 + "/b"}},
		{"labels", []informers.ListOption{informers.MatchingLabels(web)}, []string{ns1 + "/a", ns2 + "/a"}},
		{"namespace and labels", []informers.ListOption{informers.InNamespace(ns2), informers.MatchingLabels(web)}, []string{ns2 + "/a"}},
		{"index", []informers.ListOption{informers.MatchingIndex("data.k", "a")}, []string{ns1 + "/a", ns2 + "/a"}},
		{"index in namespace", []informers.ListOption{informers.MatchingIndex("data.k", "a"), informers.InNamespace(ns1)}, []string{ns1 + "/a"}},
		{"index, no match", []informers.ListOption{informers.MatchingIndex("data.k", "zzz")}, nil},
	} {
		if got := names(tc.opts...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}

	_, err = inf.Get(t.Context(), types.NamespacedName{Namespace: ns1, Name: "missing"})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `configmaps "missing" not found`) {
		t.Errorf("Get of a missing object = %v, want NotFound naming configmaps", err)
	}

	// The untyped reader copies: changing its result leaves the cache alone.
	var list corev1.ConfigMapList
	if err := c.List(t.Context(), &list, informers.InNamespace(ns2)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Kind != "ConfigMap" {
		t.Fatalf("List: %d items (kind %q), want 1 ConfigMap", len(list.Items), list.Items[0].Kind)
	}
	list.Items[0].Data["k"] = "changed"
	again, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns2, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Data["k"] != "a" {
		t.Error("changing a List result changed the cache")
	}
}

// webOnly makes ConfigMaps web and db (labelled tier=web and tier=db) in
// a new namespace, and returns it with a started cache whose ConfigMaps
// are those of tier=web in it (Options.ByKind).
func webOnly(t *testing.T) (string, *informers.Cache) {
	t.Helper()
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "web", map[string]string{"tier": "web"})
	testenv.CreateConfigMap(t, cs, ns, "db", map[string]string{"tier": "db"})
	return ns, started(t, admin, informers.Options{
		ByKind: map[schema.GroupKind]informers.Selection{
			{Kind: "ConfigMap"}: {Namespace: ns, Labels: labels.SelectorFromSet(labels.Set{"tier": "web"})},
		},
	})
}

func TestSelectionFiltersOnTheServer(t *testing.T) { inBothForms(t, testSelectionFiltersOnTheServer) }

func testSelectionFiltersOnTheServer(t *testing.T) {
	_, c := webOnly(t)
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := inf.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Name != "web" {
		t.Errorf("cache with a default selection holds %d objects, want only %q", len(objs), "web")
	}
	if !strings.Contains(inf.String(), "with labels tier=web") {
		t.Errorf("informer description %q does not mention its selector", inf)
	}
}

func TestSyncErrorsNameTheCause(t *testing.T) {
	admin := plane.Config(t)
	nobody, err := plane.Environment().AddUser(envtestUser("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cfg    *rest.Config
		sel    informers.Selection
		kind   func(c *informers.Cache) error
		want   []string
		reason string
	}{
		{
			name: "forbidden",
			cfg:  nobody,
			kind: func(c *informers.Cache) error {
				_, err := informers.For[*corev1.Secret](c, informers.Selection{})
				return err
			},
			want:   []string{"cache for v1 Secret not synced after", "forbidden", "grant list and watch", "secrets"},
			reason: "forbidden",
		},
		{
			name: "CRD not installed",
			cfg:  admin,
			kind: func(c *informers.Cache) error {
				_, err := informers.For[*unstructured.Unstructured](c, informers.Selection{Kind: schema.GroupVersionKind{Group: "ghosts.example.com", Version: "v1", Kind: "Ghost"}})
				return err
			},
			want:   []string{"ghosts.example.com/v1 Ghost", "is its CRD installed"},
			reason: "not_found",
		},
		{
			name: "API server unreachable",
			cfg:  &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
			kind: func(c *informers.Cache) error {
				_, err := informers.For[*corev1.Pod](c, informers.Selection{})
				return err
			},
			want:   []string{"cache for v1 Pod not synced", "connection refused"},
			reason: "unreachable",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reported := make(chan informers.RequestError, 100)
			c := started(t, tc.cfg, informers.Options{SyncTimeout: 3 * time.Second, OnRequestError: func(e informers.RequestError) {
				select {
				case reported <- e:
				default:
				}
			}})
			if err := tc.kind(c); err != nil {
				t.Fatal(err)
			}
			err := c.WaitForSync(t.Context())
			var se *informers.SyncError
			if !errors.As(err, &se) {
				t.Fatalf("WaitForSync = %v, want a *SyncError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if h := c.Health(); h == nil {
				t.Error("Health() = nil for a cache that cannot sync")
			}
			select {
			case e := <-reported:
				if e.Class != tc.reason || (e.Verb != "list" && e.Verb != "watch") {
					t.Errorf("OnRequestError got reason %q verb %q, want %q", e.Class, e.Verb, tc.reason)
				}
			default:
				t.Error("OnRequestError was not called")
			}
		})
	}
}

func TestRecoversWhenAllowed(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", nil)
	user, err := plane.Environment().AddUser(envtestUser("late-reader"))
	if err != nil {
		t.Fatal(err)
	}
	c := started(t, user, informers.Options{Namespace: ns, SyncTimeout: -1})
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "Health reports forbidden", func() bool {
		h := c.Health()
		return h != nil && strings.Contains(h.Error(), "forbidden")
	})
	testenv.Grant(t, cs, ns, "late-reader", "configmaps", "get", "list", "watch")
	// The reflector retries with backoff (up to 30 s between tries).
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		return inf.HasSynced() && c.Health() == nil, nil
	})
	if err != nil {
		t.Fatalf("cache did not recover after RBAC allowed the list: %v (health: %v)", err, c.Health())
	}
	if _, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}); err != nil {
		t.Fatal(err)
	}
}
