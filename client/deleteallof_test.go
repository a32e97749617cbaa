package client_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

func configMapNames(t *testing.T, c *client.Client, opts ...informers.ListOption) []string {
	t.Helper()
	var list corev1.ConfigMapList
	if err := c.List(t.Context(), &list, opts...); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	return names
}

// TestDeleteAllOf deletes by label and by field in one namespace: objects
// of the same label elsewhere stay, an object a finalizer holds stays
// (terminating), and the cache never shows the deleted ones afterwards.
func TestDeleteAllOf(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	other := testenv.Namespace(t, cs, "other")
	web := map[string]string{"app": "web"}
	testenv.CreateConfigMap(t, cs, ns, "web-1", web)
	testenv.CreateConfigMap(t, cs, ns, "web-2", web)
	testenv.CreateConfigMap(t, cs, ns, "db", map[string]string{"app": "db"})
	testenv.CreateConfigMap(t, cs, ns, "lone", nil)
	testenv.CreateConfigMap(t, cs, other, "web-1", web) // same name and label, another namespace
	held, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "web-held", Labels: web, Finalizers: []string{"example.com/hold"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cs.CoreV1().ConfigMaps(ns).Patch(t.Context(), held.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	mgr := testenv.NewManager(t, admin, framework.Options{})
	testenv.StartManager(t, mgr)
	c := mgr.Client()
	if got := configMapNames(t, c, informers.InNamespace(ns)); len(got) < 5 {
		t.Fatalf("cache holds %v before the deletion", got)
	}

	err = c.DeleteAllOf(t.Context(), &corev1.ConfigMap{}, informers.Selection{Namespace: ns, Labels: labels.SelectorFromSet(web)},
		client.Propagation(metav1.DeletePropagationBackground))
	if err != nil {
		t.Fatal(err)
	}
	// Read your writes: no wait, the cache already hides what was deleted.
	got := configMapNames(t, c, informers.InNamespace(ns))
	if slices.Contains(got, "web-1") || slices.Contains(got, "web-2") || !slices.Contains(got, "db") || !slices.Contains(got, "lone") || !slices.Contains(got, "web-held") {
		t.Errorf("after deleting app=web in %s the cache lists %v, want db, lone and web-held (terminating)", ns, got)
	}
	var gone corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "web-1"}, &gone); err == nil {
		t.Errorf("Get %s/web-1 after DeleteAllOf found it", ns)
	}
	// Another process re-creates web-2 at once: the cache shows the new one,
	// whose UID tells it from the one deleted, without waiting out the
	// deletion mark.
	reborn := testenv.CreateConfigMap(t, cs, ns, "web-2", web)
	testenv.Eventually(t, "the cache shows the re-created web-2", func() bool {
		var cm corev1.ConfigMap
		err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "web-2"}, &cm)
		return err == nil && cm.UID == reborn.UID
	})
	if _, err := cs.CoreV1().ConfigMaps(other).Get(t.Context(), "web-1", metav1.GetOptions{}); err != nil {
		t.Errorf("%s/web-1 in the other namespace: %v", other, err)
	}
	h, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "web-held", metav1.GetOptions{})
	if err != nil || h.DeletionTimestamp == nil {
		t.Errorf("web-held should be terminating, held by its finalizer: %v, %v", h.GetDeletionTimestamp(), err)
	}

	// By field: the server evaluates it.
	if err := c.DeleteAllOf(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns}},
		informers.Selection{Fields: fields.OneTermEqualSelector("metadata.name", "lone")}); err != nil {
		t.Fatal(err)
	}
	if got := configMapNames(t, c, informers.InNamespace(ns)); slices.Contains(got, "lone") || !slices.Contains(got, "db") || !slices.Contains(got, "web-2") {
		t.Errorf("after deleting metadata.name=lone the cache lists %v", got)
	}

	for name, tc := range map[string]struct {
		sel  informers.Selection
		opts []client.WriteOption
		want string
	}{
		"no namespace": {informers.Selection{}, nil, "ConfigMap is namespaced: give the namespace"},
		"a UID":        {informers.Selection{Namespace: ns}, []client.WriteOption{client.MatchingUID("x")}, "MatchingUID names one object"},
	} {
		err := c.DeleteAllOf(t.Context(), &corev1.ConfigMap{}, tc.sel, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "db", metav1.GetOptions{}); err != nil {
		t.Errorf("db survived every refused deletion? %v", err)
	}
}

// TestListMatchingFields lists by metadata.name and metadata.namespace from
// the cache, refuses other fields there with an error that says where they
// work, and lists by any field the kind supports without the cache.
func TestListMatchingFields(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "alpha", nil)
	testenv.CreateConfigMap(t, cs, ns, "beta", nil)
	for name, typ := range map[string]corev1.SecretType{"plain": corev1.SecretTypeOpaque, "special": "example.com/special"} {
		if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: typ}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{Namespace: ns}})
	testenv.StartManager(t, mgr)
	c := mgr.Client()

	if got := configMapNames(t, c, informers.MatchingFields(fields.OneTermEqualSelector("metadata.name", "beta"))); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("metadata.name=beta: got %v", got)
	}
	if got := configMapNames(t, c, informers.MatchingFields(fields.ParseSelectorOrDie("metadata.namespace="+ns+",metadata.name!=beta"))); !slices.Contains(got, "alpha") || slices.Contains(got, "beta") {
		t.Errorf("metadata.namespace=%s,metadata.name!=beta: got %v", ns, got)
	}
	var list corev1.ConfigMapList
	err := c.List(t.Context(), &list, informers.MatchingFields(fields.OneTermEqualSelector("metadata.namespace", "elsewhere")))
	if !errors.Is(err, informers.ErrNotCached) {
		t.Errorf("metadata.namespace of a namespace the cache does not hold: got %v, want ErrNotCached", err)
	}

	typeSel := fields.OneTermEqualSelector("type", "example.com/special")
	var secrets corev1.SecretList
	err = c.List(t.Context(), &secrets, informers.MatchingFields(typeSel))
	for _, want := range []string{"not type", "Selection.Fields", "APIReader"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("cache List by type: got %v, want an error containing %q", err, want)
		}
	}
	if err := mgr.APIReader().List(t.Context(), &secrets, informers.InNamespace(ns), informers.MatchingFields(typeSel)); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 || secrets.Items[0].Name != "special" {
		t.Errorf("APIReader List by type=example.com/special: got %d items %v", len(secrets.Items), secrets.Items)
	}
}
