package controllerutil_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework/controllerutil"
	"github.com/converge-dev/converge/informers"
)

// Every helper refuses a nil argument, or a typed nil, with an error naming
// it, instead of panicking; the queries answer false for a nil object.
func TestNilArgumentsAreRefusedByName(t *testing.T) {
	s := newScheme(t)
	owner := deployment("ns", "a", "uid-a")
	var (
		nilOwner *appsv1.Deployment
		nilCM    *corev1.ConfigMap
		c        *client.Client
	)
	offline, err := client.New(client.Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Scheme: s,
		Mapper: meta.NewDefaultRESTMapper(nil), Cache: &informers.Cache{}}) // never reached
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mutate := func() error { return nil }
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"SetControllerReference owner", func() error { return controllerutil.SetControllerReference(nilOwner, configMap(), s) }, "owner is a nil *v1.Deployment"},
		{"SetControllerReference obj", func() error { return controllerutil.SetControllerReference(owner, nilCM, s) }, "obj is a nil *v1.ConfigMap"},
		{"SetControllerReference nil interface", func() error { return controllerutil.SetControllerReference(owner, nil, s) }, "obj is nil"},
		{"SetOwnerReference owner", func() error { return controllerutil.SetOwnerReference(nilOwner, configMap(), s) }, "owner is a nil *v1.Deployment"},
		{"SetOwnerReference obj", func() error { return controllerutil.SetOwnerReference(owner, nilCM, s) }, "obj is a nil *v1.ConfigMap"},
		{"RemoveOwnerReference owner", func() error {
			_, err := controllerutil.RemoveOwnerReference(nilOwner, configMap(), s)
			return err
		}, "owner is a nil *v1.Deployment"},
		{"RemoveOwnerReference obj", func() error {
			_, err := controllerutil.RemoveOwnerReference(owner, nilCM, s)
			return err
		}, "obj is a nil *v1.ConfigMap"},
		{"AddFinalizer", func() error { _, err := controllerutil.AddFinalizer(nilCM, "example.com/f"); return err }, "obj is a nil *v1.ConfigMap"},
		{"AddFinalizer nil interface", func() error { _, err := controllerutil.AddFinalizer(nil, "example.com/f"); return err }, "obj is nil"},
		{"RemoveFinalizer", func() error { _, err := controllerutil.RemoveFinalizer(nilCM, "example.com/f"); return err }, "obj is a nil *v1.ConfigMap"},
		{"CreateOrUpdate obj", func() error { _, err := controllerutil.CreateOrUpdate(ctx, c, nilCM, mutate); return err }, "obj is a nil *v1.ConfigMap"},
		{"CreateOrUpdate client", func() error { _, err := controllerutil.CreateOrUpdate(ctx, c, configMap(), mutate); return err }, "c is a nil *client.Client"},
		{"CreateOrUpdate mutate", func() error { _, err := controllerutil.CreateOrUpdate(ctx, offline, configMap(), nil); return err }, "mutate is a nil controllerutil.MutateFunc"},
		{"CreateOrPatch obj", func() error { _, err := controllerutil.CreateOrPatch(ctx, c, nilCM, mutate); return err }, "obj is a nil *v1.ConfigMap"},
		{"CreateOrPatch client", func() error { _, err := controllerutil.CreateOrPatch(ctx, c, configMap(), mutate); return err }, "c is a nil *client.Client"},
		{"MergePatch original", func() error { _, err := controllerutil.MergePatch(nilCM, configMap(), false); return err }, "original is a nil *v1.ConfigMap"},
		{"MergePatch modified", func() error { _, err := controllerutil.MergePatch(configMap(), nilCM, true); return err }, "modified is a nil *v1.ConfigMap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := noPanic(tc.call)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s = %v, want an error containing %q", tc.name, err, tc.want)
			}
		})
	}
	if noPanic(func() error {
		if controllerutil.HasFinalizer(nilCM, "example.com/f") || controllerutil.HasControllerReference(nilCM) {
			return fmt.Errorf("a nil object has a finalizer or a controller")
		}
		return nil
	}) != nil {
		t.Error("HasFinalizer or HasControllerReference of a nil object did not answer false")
	}
}

// AddFinalizer refuses a name the API server would refuse.
func TestAddFinalizerRefusesAnInvalidName(t *testing.T) {
	for _, name := range []string{"", "has space", "example.com/"} {
		cm := configMap()
		if changed, err := controllerutil.AddFinalizer(cm, name); err == nil || changed || len(cm.Finalizers) != 0 ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", name)) || !strings.Contains(err.Error(), "ns/child") {
			t.Errorf("AddFinalizer(%q) = %v, %v (finalizers %q), want an error naming the finalizer and the object, and no change", name, changed, err, cm.Finalizers)
		}
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
