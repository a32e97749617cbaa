package client_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

// A cache narrowed by labels or fields (Options.ByKind) cannot tell an
// object that does not exist from one outside its selection. Client.Get
// asks the API server before it answers: NotFound only for an object that
// does not exist, and for one outside the selection an error wrapping
// ErrNotCached that names the selection, never a false NotFound.
func TestGetOutsideASelectionIsNotANotFound(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "web", map[string]string{"app": "web"})
	testenv.CreateConfigMap(t, cs, ns, "db", map[string]string{"app": "db"})
	mgr := testenv.NewManager(t, admin, framework.Options{Cache: informers.Options{ByKind: map[schema.GroupKind]informers.Selection{
		{Kind: "ConfigMap"}: {Labels: labels.SelectorFromSet(labels.Set{"app": "web"})},
		{Kind: "Namespace"}: {Fields: fields.OneTermEqualSelector("metadata.name", ns)},
	}}})
	testenv.StartManager(t, mgr)
	c, ctx := mgr.Client(), t.Context()

	var cm corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &cm); err != nil || cm.Labels["app"] != "web" {
		t.Fatalf("Get of an object in the selection = %v (labels %v)", err, cm.Labels)
	}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, &cm)
	if err == nil || apierrors.IsNotFound(err) || !errors.Is(err, informers.ErrNotCached) {
		t.Fatalf("Get of an existing object outside the selection = %v, want an error wrapping ErrNotCached, not NotFound", err)
	}
	for _, want := range []string{ns + "/db", "app=web", "Options.ByKind", "APIReader"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "missing"}, &cm); !apierrors.IsNotFound(err) || errors.Is(err, informers.ErrNotCached) {
		t.Errorf("Get of an object that does not exist = %v, want NotFound", err)
	}

	// A kind without namespaces, selected by name.
	var nsObj corev1.Namespace
	if err := c.Get(ctx, types.NamespacedName{Name: ns}, &nsObj); err != nil {
		t.Errorf("Get of the selected namespace: %v", err)
	}
	err = c.Get(ctx, types.NamespacedName{Name: "default"}, &nsObj)
	if !errors.Is(err, informers.ErrNotCached) || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "metadata.name="+ns) {
		t.Errorf("Get of namespace default outside the selection = %v, want ErrNotCached naming metadata.name=%s", err, ns)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "no-such-namespace"}, &nsObj); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a namespace that does not exist = %v, want NotFound", err)
	}

	// An informer answers for its selection: a controller's reads see an
	// object that left it as gone (the informer delivered its deletion).
	inf, err := informers.For[*corev1.ConfigMap](mgr.Cache(), informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}); !apierrors.IsNotFound(err) {
		t.Errorf("Informer.Get of an object outside its selection = %v, want NotFound", err)
	}
}
