package controllerutil_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework/controllerutil"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

// recording is a controllerutil.Client around a *client.Client that finds
// nothing and records the creates instead of sending them.
type recording struct {
	*client.Client
	created []string
}

func (r *recording) Get(_ context.Context, key types.NamespacedName, _ object.Object) error {
	return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
}

func (r *recording) Create(_ context.Context, obj object.Object, _ ...client.WriteOption) error {
	r.created = append(r.created, obj.GetNamespace()+"/"+obj.GetName())
	return nil
}

// CreateOrUpdate reads and writes through the controllerutil.Client it is
// given, so a wrapper around a *client.Client sees every call.
func TestCreateOrUpdateGoesThroughTheClientGiven(t *testing.T) {
	offline, err := client.New(client.Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Scheme: newScheme(t),
		Mapper: meta.NewDefaultRESTMapper(nil), Cache: &informers.Cache{}}) // never reached
	if err != nil {
		t.Fatal(err)
	}
	r := &recording{Client: offline}
	res, err := controllerutil.CreateOrUpdate(t.Context(), r, configMap(), func() error { return nil })
	if err != nil || res != controllerutil.Created {
		t.Fatalf("CreateOrUpdate = %v, %v; want created", res, err)
	}
	if want := configMap().Namespace + "/" + configMap().Name; len(r.created) != 1 || r.created[0] != want {
		t.Errorf("created %v, want [%s]", r.created, want)
	}
}
