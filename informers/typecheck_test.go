package informers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

// A Transform that returns another type than it was given puts objects of
// that type in the cache. Reads through the informer then fail with an
// error naming both types (they used to panic on the type assertion), and
// handlers are not called with such an object, as for every event.
func TestWronglyTypedCachedObjectsAreErrorsNamingBothTypes(t *testing.T) {
	srv := fake.Start(t, fake.Options{Objects: []object.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "odd"}},
	}})
	c, err := informers.New(srv.Config(), informers.Options{Transform: func(obj any) (any, error) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "odd" {
			return &corev1.Secret{ObjectMeta: cm.ObjectMeta}, nil // breaks the documented rule
		}
		return obj, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var added []string
	if _, err := inf.AddListener(informers.ListenerFuncs[*corev1.ConfigMap]{AddFunc: func(cm *corev1.ConfigMap, _ bool) {
		mu.Lock()
		added = append(added, cm.Name)
		mu.Unlock()
	}}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}

	const want = "*v1.Secret, not *v1.ConfigMap"
	if cm, err := noPanic(func() (*corev1.ConfigMap, error) {
		return inf.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "odd"})
	}); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "ns/odd") {
		t.Errorf("Get of the wrongly typed object = %v, %v; want an error naming ns/odd and %q", cm, err, want)
	}
	if _, err := inf.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "plain"}); err != nil {
		t.Errorf("Get of a well-typed object: %v", err)
	}
	if l, err := noPanic(func() ([]*corev1.ConfigMap, error) { return inf.List(ctx) }); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("List = %d objects, %v; want an error naming %q", len(l), err, want)
	}
	var into corev1.ConfigMap
	if _, err := noPanic(func() (struct{}, error) {
		return struct{}{}, c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "odd"}, &into)
	}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Cache.Get = %v, want an error naming %q", err, want)
	}
	// The handler saw the well-typed object only (once it synced, every
	// initial add has been handed out).
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(added) > 0, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || fmt.Sprint(added) != "[plain]" {
		t.Errorf("handler saw %v (%v), want [plain]", added, err)
	}
}

// Every function and method of the cache that takes an object, a handler
// or a function refuses a nil one (or a typed nil) with an error naming the
// argument, instead of panicking now or in an informer's goroutine later.
func TestNilArgumentsAreRefusedByName(t *testing.T) {
	srv := fake.Start(t, fake.Options{})
	c, err := informers.New(srv.Config(), informers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		cm      *corev1.ConfigMap
		list    *corev1.ConfigMapList
		handler *countingHandler
	)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"Cache.Get", func() error { return c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "n"}, cm) }, "into is a nil *v1.ConfigMap"},
		{"Cache.Get nil interface", func() error { return c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "n"}, nil) }, "into is nil"},
		{"Cache.List", func() error { return c.List(ctx, list) }, "list is a nil *v1.ConfigMapList"},
		{"Cache.List nil interface", func() error { return c.List(ctx, nil) }, "list is nil"},
		{"ForObject", func() error { _, err := informers.ForObject(c, cm, informers.Selection{}); return err }, "example is a nil *v1.ConfigMap"},
		{"ForObject nil interface", func() error {
			_, err := informers.ForObject[object.Object](c, nil, informers.Selection{})
			return err
		}, "example is nil"},
		{"AddListener", func() error { _, err := inf.AddListener(handler, cache.HandlerOptions{}); return err }, "h is a nil *informers_test.countingHandler"},
		{"AddListener nil interface", func() error { _, err := inf.AddListener(nil, cache.HandlerOptions{}); return err }, "h is nil"},
		{"AddIndex", func() error { return inf.AddIndex("by-x", nil) }, "fn is a nil func"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := noPanic(func() (struct{}, error) { return struct{}{}, tc.call() })
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "scheme") {
				t.Errorf("%s = %v, want an error containing %q (and not blaming the scheme)", tc.name, err, tc.want)
			}
		})
	}
}

type countingHandler struct {
	informers.ListenerFuncs[*corev1.ConfigMap]
}

// noPanic calls f and turns a panic into an error, so that one broken case
// does not end the whole test.
func noPanic[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}
