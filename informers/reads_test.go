package informers_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

func TestReadsOutsideTheCachedNamespaceFail(t *testing.T) {
	inBothForms(t, testReadsOutsideTheCachedNamespaceFail)
}

func testReadsOutsideTheCachedNamespaceFail(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	cached, other := testenv.Namespace(t, cs, "cached"), testenv.Namespace(t, cs, "other")
	testenv.CreateConfigMap(t, cs, cached, "here", nil)
	testenv.CreateConfigMap(t, cs, other, "there", nil)
	c := started(t, admin, informers.Options{Namespace: cached})

	// The object exists: a NotFound would tell the caller it does not.
	var cm corev1.ConfigMap
	err := c.Get(t.Context(), types.NamespacedName{Namespace: other, Name: "there"}, &cm)
	if err == nil || apierrors.IsNotFound(err) || !errors.Is(err, informers.ErrNotCached) {
		t.Fatalf("Get outside the cached namespace = %v, want an error wrapping ErrNotCached, not NotFound", err)
	}
	for _, want := range []string{`"` + other + `"`, `"` + cached + `"`, "there"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	err = c.List(t.Context(), &corev1.ConfigMapList{}, informers.InNamespace(other))
	if !errors.Is(err, informers.ErrNotCached) || !strings.Contains(err.Error(), other) {
		t.Errorf("List in another namespace = %v, want an error wrapping ErrNotCached naming %s", err, other)
	}

	// Inside the namespace, and for kinds without namespaces, reads work.
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: cached, Name: "here"}, &cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: cached, Name: "missing"}, &cm); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing object in the cached namespace = %v, want NotFound", err)
	}
	var nsObj corev1.Namespace
	if err := c.Get(t.Context(), types.NamespacedName{Name: other}, &nsObj); err != nil {
		t.Errorf("Get of a cluster-scoped object with a namespaced cache: %v", err)
	}
}

func TestReadOfAKindTheIdentityMayGetButNotListFailsFast(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", nil)
	user, err := plane.Environment().AddUser(envtestUser("getter"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Grant(t, cs, ns, "getter", "configmaps", "get")
	const syncTimeout = 30 * time.Second
	c := started(t, user, informers.Options{Namespace: ns, SyncTimeout: syncTimeout})
	if err := c.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var cm corev1.ConfigMap
	err = c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}, &cm)
	took := time.Since(start)
	t.Logf("Get took %v: %v", took.Round(time.Millisecond), err)
	if err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("Get = %v, want a forbidden error", err)
	}
	for _, want := range []string{"list", "watch", "configmaps", "APIReader"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if took > syncTimeout/2 {
		t.Errorf("Get took %v: it waited for the sync timeout instead of failing at the first forbidden list", took)
	}
	// The informer that could never sync is gone: readiness does not stay false.
	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return c.Health() == nil, nil
	})
	if err != nil {
		t.Errorf("Health stays %v after the failed read", c.Health())
	}
	if n := len(c.Stats()); n != 0 {
		t.Errorf("the cache keeps %d informers after the failed read, want 0: %+v", n, c.Stats())
	}
}

func TestListWaitsForOwnWrites(t *testing.T) { inBothForms(t, testListWaitsForOwnWrites) }

func testListWaitsForOwnWrites(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	c := started(t, admin, informers.Options{Namespace: ns, ReadYourWritesTimeout: 500 * time.Millisecond})
	web, err := labels.Parse("app=web")
	if err != nil {
		t.Fatal(err)
	}
	all, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	webOnly, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Labels: web})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}

	t.Run("a list after a create shows the object", func(t *testing.T) {
		for i := range 20 {
			cm := testenv.CreateConfigMap(t, cs, ns, "web-"+strconv.Itoa(i), map[string]string{"app": "web"})
			c.ObserveWrite(configMapKind, cm)
			for _, inf := range []*informers.Informer[*corev1.ConfigMap]{all, webOnly} {
				got, err := inf.List(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if !containsName(got, cm.Name) {
					t.Fatalf("create %d: List from %s misses %s, just written at resourceVersion %s", i, inf, cm.Name, cm.ResourceVersion)
				}
			}
		}
	})

	t.Run("a list after a deletion does not show the object", func(t *testing.T) {
		cm := testenv.CreateConfigMap(t, cs, ns, "doomed", map[string]string{"app": "web"})
		c.ObserveWrite(configMapKind, cm)
		if got, err := all.List(t.Context()); err != nil || !containsName(got, "doomed") {
			t.Fatalf("List = %d objects, %v; want doomed among them", len(got), err)
		}
		if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.ObserveDeletion(configMapKind, cm)
		got, err := all.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if containsName(got, "doomed") {
			t.Fatal("List shows an object this process deleted")
		}
	})

	t.Run("a write the cache never shows fails the list, naming it", func(t *testing.T) {
		late := testenv.CreateConfigMap(t, cs, ns, "late", nil)
		late.ResourceVersion = "999999999"
		c.ObserveWrite(configMapKind, late)
		_, err := all.List(t.Context())
		if err == nil || !strings.Contains(err.Error(), "has not caught up") || !strings.Contains(err.Error(), ns+"/late") {
			t.Fatalf("List = %v, want an error naming the write the cache lacks", err)
		}
	})

	t.Run("a write outside the informer's selection does not hold up its lists", func(t *testing.T) {
		other := testenv.CreateConfigMap(t, cs, ns, "not-web", map[string]string{"app": "db"})
		other.ResourceVersion = "999999998" // the cache would never catch up with it
		c.ObserveWrite(configMapKind, other)
		if _, err := webOnly.List(t.Context()); err != nil {
			t.Fatalf("List with app=web waited for a write of an app=db object: %v", err)
		}
		if _, err := all.List(t.Context(), informers.InNamespace(ns), informers.MatchingLabels(web)); err != nil {
			t.Fatalf("List matching app=web waited for a write of an app=db object: %v", err)
		}
		if _, err := webOnly.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "not-web"}); !apierrors.IsNotFound(err) {
			t.Fatalf("Get with app=web of an app=db object this process wrote = %v, want NotFound at once", err)
		}
		onlyWeb0, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Fields: fields.OneTermEqualSelector("metadata.name", "web-0")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := onlyWeb0.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "not-web"}); !apierrors.IsNotFound(err) {
			t.Fatalf("Get with metadata.name=web-0 of another object this process wrote = %v, want NotFound at once", err)
		}
	})
}

func containsName(objs []*corev1.ConfigMap, name string) bool {
	for _, o := range objs {
		if o.Name == name {
			return true
		}
	}
	return false
}

// A read that needs a new informer after the cache stopped can never be
// served: it fails at once with ErrStopped, instead of waiting out the sync
// timeout for an informer that will not run.
func TestReadsAfterTheCacheStoppedFailAtOnce(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "here", nil)
	c, err := informers.New(admin, informers.Options{Namespace: ns, SyncTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "here"}, &cm); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}

	// Secrets have no informer yet: one would be created, and never run.
	var s corev1.Secret
	err = c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "any"}, &s)
	if !errors.Is(err, informers.ErrStopped) {
		t.Fatalf("Get of a new kind after Start returned = %v, want an error wrapping ErrStopped", err)
	}
	if !strings.Contains(err.Error(), "Secret") {
		t.Errorf("error %q does not name the kind", err)
	}
	if err := c.List(t.Context(), &corev1.SecretList{}); !errors.Is(err, informers.ErrStopped) {
		t.Errorf("List of a new kind after Start returned = %v, want an error wrapping ErrStopped", err)
	}
}

// Reads that wait together for an informer the identity may not list all
// fail, whichever of them sees the refusal first and drops the informer:
// none reads the dropped informer's empty store as NotFound.
func TestConcurrentReadsOfAKindTheIdentityMayNotListAllFail(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", nil)
	user, err := plane.Environment().AddUser(envtestUser("concurrent-getter"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Grant(t, cs, ns, "concurrent-getter", "configmaps", "get")
	c := started(t, user, informers.Options{Namespace: ns, SyncTimeout: 30 * time.Second})
	if err := c.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	const rounds, readers = 5, 8
	for round := range rounds {
		errs := make([]error, readers)
		var wg sync.WaitGroup
		for i := range readers {
			wg.Go(func() {
				var cm corev1.ConfigMap
				errs[i] = c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}, &cm)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if !apierrors.IsForbidden(err) {
				t.Errorf("round %d, reader %d: Get = %v, want a forbidden error", round, i, err)
			}
		}
	}
}
