package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/informers"
)

// Every method taking an object refuses a nil one, or a typed nil, with an
// error naming the argument and its type, before any request: none panics,
// and none blames the scheme.
func TestNilObjectsAreRefusedByName(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // never reached
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	cache, err := informers.New(cfg, informers.Options{Scheme: scheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{Scheme: scheme.Scheme, Mapper: mapper, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	api, err := client.NewAPIReader(client.Options{Config: cfg, Scheme: scheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	var (
		cm   *corev1.ConfigMap
		list *corev1.ConfigMapList
		u    *unstructured.Unstructured
		ac   *corev1ac.ConfigMapApplyConfiguration
	)
	key := types.NamespacedName{Namespace: "ns", Name: "n"}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"Get", func() error { return c.Get(ctx, key, cm) }, "obj is a nil *v1.ConfigMap"},
		{"Get unstructured", func() error { return c.Get(ctx, key, u) }, "obj is a nil *unstructured.Unstructured"},
		{"Get nil interface", func() error { return c.Get(ctx, key, nil) }, "obj is nil"},
		{"List", func() error { return c.List(ctx, list) }, "list is a nil *v1.ConfigMapList"},
		{"List nil interface", func() error { return c.List(ctx, nil) }, "list is nil"},
		{"Create", func() error { return c.Create(ctx, cm) }, "obj is a nil *v1.ConfigMap"},
		{"Update", func() error { return c.Update(ctx, cm) }, "obj is a nil *v1.ConfigMap"},
		{"Patch", func() error { return c.Patch(ctx, cm, types.MergePatchType, []byte("{}")) }, "obj is a nil *v1.ConfigMap"},
		{"Delete", func() error { return c.Delete(ctx, cm) }, "obj is a nil *v1.ConfigMap"},
		{"Delete nil interface", func() error { return c.Delete(ctx, nil) }, "obj is nil"},
		{"Apply", func() error { _, err := c.Apply(ctx, cm); return err }, "obj is a nil *v1.ConfigMap"},
		{"Apply configuration", func() error { _, err := c.Apply(ctx, ac); return err }, "obj is a nil *v1.ConfigMapApplyConfiguration"},
		{"Apply nil interface", func() error { _, err := c.Apply(ctx, nil); return err }, "obj is nil"},
		{"Status().Update", func() error { return c.Status().Update(ctx, cm) }, "obj is a nil *v1.ConfigMap"},
		{"Status().Patch", func() error { return c.Status().Patch(ctx, cm, types.MergePatchType, []byte("{}")) }, "obj is a nil *v1.ConfigMap"},
		{"Status().Apply", func() error { _, err := c.Status().Apply(ctx, cm); return err }, "obj is a nil *v1.ConfigMap"},
		{"DeleteAllOf", func() error { return c.DeleteAllOf(ctx, cm, informers.Selection{Namespace: "ns"}) }, "example is a nil *v1.ConfigMap"},
		{"APIReader.Get", func() error { return api.Get(ctx, key, cm) }, "obj is a nil *v1.ConfigMap"},
		{"APIReader.List", func() error { return api.List(ctx, list) }, "list is a nil *v1.ConfigMapList"},
		{"KindOf", func() error { _, err := client.KindOf(scheme.Scheme, cm); return err }, "obj is a nil *v1.ConfigMap"},
		{"KindOf nil interface", func() error { _, err := client.KindOf(scheme.Scheme, nil); return err }, "obj is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := noPanic(tc.call)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "scheme") {
				t.Errorf("%s = %v, want an error containing %q (and not blaming the scheme)", tc.name, err, tc.want)
			}
		})
	}
}

// noPanic calls f and turns a panic into an error, so that one broken case
// does not end the whole table.
func noPanic(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}
