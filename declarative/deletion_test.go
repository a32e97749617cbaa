package declarative_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// hold is a finalizer someone other than converge puts on a child.
const hold = "example.com/hold"

// setFinalizers sets the finalizers of the object name, of obj's type.
func setFinalizers(r *graphRig, name string, obj object.Object, finalizers ...string) {
	r.t.Helper()
	r.get(name, obj)
	obj.SetFinalizers(finalizers)
	if err := r.mgr.Client().Update(r.t.Context(), obj); err != nil {
		r.t.Fatal(err)
	}
}

func TestChildBeingDeletedIsNotReady(t *testing.T) {
	testenv.InBothForms(t, testChildBeingDeletedIsNotReady)
}

func testChildBeingDeletedIsNotReady(t *testing.T) {
	// A ConfigMap held by someone's finalizer, left out then declared
	// again while it is being deleted, is not ready: the old object is
	// going away, and a new one is applied once it is gone.
	children := func(include bool) func() []any {
		return func() []any {
			return []any{declarative.NewChild(configMap("config")).IncludeWhen(include), declarative.NewChild(configMap("always"))}
		}
	}
	r := startGraph(t, children(true))
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
	old := &corev1.ConfigMap{}
	setFinalizers(r, "config", old, hold)
	r.declare(children(false))
	testenv.Eventually(t, "ConfigMap config is being deleted", func() bool {
		cm := &corev1.ConfigMap{}
		return r.get("config", cm) && cm.DeletionTimestamp != nil
	})
	r.declare(children(true))
	c := r.waitReady(declarative.NotReadyReason, "ConfigMap config is not ready yet (created): it is being deleted (Terminating, finalizer "+hold+") since ")
	if c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False", c)
	}
	setFinalizers(r, "config", &corev1.ConfigMap{})
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
	again := &corev1.ConfigMap{}
	if !r.get("config", again) || again.UID == old.UID || again.DeletionTimestamp != nil {
		t.Errorf("ConfigMap config was not created again once the old one was gone: %+v", again.ObjectMeta)
	}
}

func TestParentDeletionWaitingForAChildSaysSo(t *testing.T) {
	testenv.InBothForms(t, testParentDeletionWaitingForAChildSaysSo)
}

func testParentDeletionWaitingForAChildSaysSo(t *testing.T) {
	// A parent's deletion waits for Deployment web, which a finalizer of
	// someone else's holds, before it deletes ConfigMap config, which web
	// is After: its Ready condition and its reconcile's Blocker say so.
	r := startGraphOn(t, framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}},
		declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}}}, func() []any {
			config := configMap("config")
			return []any{config, declarative.NewChild(deployment("web")).After(config).ReadyWhen("applied", func(*appsv1.Deployment) bool { return true })}
		})
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
	setFinalizers(r, "web", &appsv1.Deployment{}, hold)
	if err := r.mgr.Client().Delete(t.Context(), &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "site"}}); err != nil {
		t.Fatal(err)
	}
	const waits = "deletion waits for Deployment web (Terminating, finalizer " + hold + ")"
	c := r.waitReady(declarative.WaitingReason, waits)
	if c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False", c)
	}
	testenv.Eventually(t, "metrics served", func() bool { return r.mgr.MetricsAddress() != "" })
	testenv.Eventually(t, "the reconcile notes the wait as its Blocker", func() bool {
		body := debugObject(t, r.mgr, "StaticSite", "ns", "site")
		return strings.Contains(body, `"reason": "Waiting"`) && strings.Contains(body, waits)
	})
	if !r.get("config", &corev1.ConfigMap{}) {
		t.Error("ConfigMap config, which web is After, was deleted before web")
	}

	setFinalizers(r, "web", &appsv1.Deployment{})
	testenv.Eventually(t, "the parent and its children are gone", func() bool {
		return !r.get("site", &v1alpha1.StaticSite{}) && !r.get("config", &corev1.ConfigMap{}) && !r.get("web", &appsv1.Deployment{})
	})
}
