package fake_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
)

// These specs pin behaviour the fake shares with kube-apiserver, each
// checked against a real one.

// A create naming a resourceVersion fails, as kube-apiserver's does (500
// with no reason, "resourceVersion should not be set on objects to be
// created"); an apply that creates ignores it.
func TestCreateWithAResourceVersionFails(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	ctx := t.Context()
	cm := configMap("cm")
	cm.ResourceVersion = "5"
	_, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{})
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError || status.Status().Reason != metav1.StatusReasonUnknown ||
		status.Status().Message != "resourceVersion should not be set on objects to be created" {
		t.Errorf("create with resourceVersion 5: got %#v, want a 500 with no reason saying resourceVersion should not be set", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the refused create: %v, want NotFound", err)
	}
	ac := corev1ac.ConfigMap("applied", "ns").WithResourceVersion("5")
	if _, err := cs.CoreV1().ConfigMaps("ns").Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "m"}); err != nil {
		t.Errorf("apply creating an object with resourceVersion 5: %v, want it created", err)
	}
}

// An update of a custom resource must name a resourceVersion (422 on
// kube-apiserver); built-in kinds such as ConfigMap allow an unconditional
// update.
func TestCustomResourceUpdateNeedsAResourceVersion(t *testing.T) {
	cs, dc := clients(t, fake.Options{Objects: []object.Object{configMap("cm", "k", "v")}})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	u, err := sites.Create(ctx, unstructuredSite("s"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetResourceVersion("")
	_ = unstructured.SetNestedField(u.Object, "caddy", "spec", "image")
	_, err = sites.Update(ctx, u, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.resourceVersion") {
		t.Errorf("update of a custom resource without resourceVersion: got %v, want Invalid naming metadata.resourceVersion", err)
	}
	_, err = sites.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.resourceVersion") {
		t.Errorf("status update of a custom resource without resourceVersion: got %v, want Invalid naming metadata.resourceVersion", err)
	}
	cm := configMap("cm", "k", "unconditional")
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update of a ConfigMap without resourceVersion: %v, want it applied", err)
	}
}

// metadata.generation is kept only by the kinds whose API server strategy
// keeps it: workloads and custom resources, not ConfigMaps or Secrets.
func TestGenerationOnlyForKindsThatKeepIt(t *testing.T) {
	cs, dc := clients(t, fake.Options{})
	ctx := t.Context()
	cm, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("cm", "k", "v"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Generation != 0 {
		t.Errorf("created ConfigMap: generation %d, want 0 (kube-apiserver keeps none)", cm.Generation)
	}
	cm.Data["k"] = "changed"
	if cm, err = cs.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil || cm.Generation != 0 {
		t.Errorf("updated ConfigMap: generation %d (%v), want 0", cm.Generation, err)
	}
	sec, err := cs.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	if err != nil || sec.Generation != 0 {
		t.Errorf("created Secret: generation %d (%v), want 0", sec.Generation, err)
	}
	d, err := cs.AppsV1().Deployments("ns").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{})
	if err != nil || d.Generation != 1 {
		t.Errorf("created Deployment: generation %d (%v), want 1", d.Generation, err)
	}
	u, err := dc.Resource(staticSites).Namespace("ns").Create(ctx, unstructuredSite("s"), metav1.CreateOptions{})
	if err != nil || u.GetGeneration() != 1 {
		t.Errorf("created StaticSite: generation %d (%v), want 1", u.GetGeneration(), err)
	}
	eps, err := cs.DiscoveryV1().EndpointSlices("ns").Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e"}, AddressType: discoveryv1.AddressTypeIPv4}, metav1.CreateOptions{})
	if err != nil || eps.Generation != 1 {
		t.Errorf("created EndpointSlice: generation %d (%v), want 1", eps.Generation, err)
	}
	eps.Labels = map[string]string{"kubernetes.io/service-name": "web"}
	if eps, err = cs.DiscoveryV1().EndpointSlices("ns").Update(ctx, eps, metav1.UpdateOptions{}); err != nil || eps.Generation != 2 {
		t.Errorf("EndpointSlice after a label change: generation %d (%v), want 2 (its strategy counts labels)", eps.Generation, err)
	}
	seeded := fake.Start(t, fake.Options{Objects: []object.Object{configMap("seeded")}})
	got, err := kubernetes.NewForConfigOrDie(seeded.Config()).CoreV1().ConfigMaps("ns").Get(ctx, "seeded", metav1.GetOptions{})
	if err != nil || got.Generation != 0 {
		t.Errorf("seeded ConfigMap: generation %d (%v), want 0", got.Generation, err)
	}
}

// Setting an object's deletionTimestamp grows its generation, when it
// keeps one.
func TestDeletionGrowsTheGeneration(t *testing.T) {
	cs, dc := clients(t, fake.Options{})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	u := unstructuredSite("s")
	u.SetFinalizers([]string{"example.converge.dev/cleanup"})
	if _, err := sites.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sites.Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := sites.Get(ctx, "s", metav1.GetOptions{})
	if err != nil || u.GetDeletionTimestamp() == nil || u.GetGeneration() != 2 {
		t.Errorf("terminating StaticSite: generation %d, deletionTimestamp %v (%v); want generation 2", u.GetGeneration(), u.GetDeletionTimestamp(), err)
	}
	cm := configMap("cm")
	cm.Finalizers = []string{"example.converge.dev/cleanup"}
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("ns").Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{}); err != nil || got.Generation != 0 {
		t.Errorf("terminating ConfigMap: generation %d (%v), want 0", got.Generation, err)
	}
}

// A patch cannot change an object's UID: metadata.uid is immutable (422),
// where an update naming another UID is a failed precondition (409).
func TestPatchCannotChangeTheUID(t *testing.T) {
	cs, _ := clients(t, fake.Options{Objects: []object.Object{configMap("cm")}})
	ctx := t.Context()
	_, err := cs.CoreV1().ConfigMaps("ns").Patch(ctx, "cm", types.MergePatchType, []byte(`{"metadata":{"uid":"other"}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.uid") {
		t.Errorf("merge patch of metadata.uid: got %v, want Invalid naming metadata.uid", err)
	}
	cm := configMap("cm")
	cm.UID = "other"
	_, err = cs.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("update naming another UID: got %v, want Conflict", err)
	}
}

// Without a status subresource, the status is part of what the generation
// follows, as for a CRD declared without one.
func TestGenerationFollowsTheStatusWithoutASubresource(t *testing.T) {
	_, dc := clients(t, fake.Options{NoStatusSubresource: []object.Object{&v1alpha1.StaticSite{}}})
	ctx := t.Context()
	sites := dc.Resource(staticSites).Namespace("ns")
	u, err := sites.Create(ctx, unstructuredSite("s"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, "http://changed", "status", "url")
	if u, err = sites.Update(ctx, u, metav1.UpdateOptions{}); err != nil || u.GetGeneration() != 2 {
		t.Errorf("a status change without a status subresource: generation %d (%v), want 2", u.GetGeneration(), err)
	}
}

// A list or watch from a resourceVersion that is not one fails (400 for a
// list, as on kube-apiserver).
func TestListFromAMalformedResourceVersionFails(t *testing.T) {
	cs, _ := clients(t, fake.Options{})
	_, err := cs.CoreV1().ConfigMaps("ns").List(t.Context(), metav1.ListOptions{ResourceVersion: "abc"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `"abc"`) {
		t.Errorf("list from resourceVersion abc: got %v, want BadRequest naming it", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "abc"}); err == nil {
		t.Errorf("watch from resourceVersion abc: no error")
	}
}
