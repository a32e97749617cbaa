package declarative_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

func TestDesiredErrorSetsReadyFalseOnceAnEvent(t *testing.T) {
	testenv.InBothForms(t, testDesiredErrorSetsReadyFalseOnceAnEvent)
}

func testDesiredErrorSetsReadyFalseOnceAnEvent(t *testing.T) {
	r := startGraphOn(t, framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}},
		declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}}}, func() []any {
			return []any{declarative.NewChild(configMap("config"))}
		})
	r.waitReady(declarative.ChildrenReadyReason, "all 1 children are ready")

	const msg = `spec.storage "lots": quantities must match the regular expression`
	r.change(func() { r.fail = errors.New(msg) })
	c := r.waitReady(declarative.DesiredFailedReason, msg)
	if c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False", c)
	}
	testenv.Eventually(t, "metrics served", func() bool { return r.mgr.MetricsAddress() != "" })
	testenv.Eventually(t, "the reconcile fails and is retried", func() bool {
		body := debugObject(t, r.mgr, "StaticSite", "ns", "site")
		return strings.Contains(body, `"failures": 3`)
	})
	testenv.Eventually(t, "a Warning Event "+declarative.DesiredFailedReason, func() bool { return hasEvent(t, r, declarative.DesiredFailedReason) })
	r.settle()
	if n := countEvents(t, r, declarative.DesiredFailedReason); n != 1 {
		t.Errorf("%d Warning Events %s for one error retried, want 1", n, declarative.DesiredFailedReason)
	}
	if !r.get("config", &corev1.ConfigMap{}) {
		t.Error("the child was deleted while Desired failed")
	}

	// Another error: another Event.
	r.change(func() { r.fail = reconcile.Terminal(errors.New("spec.image is empty")) })
	r.waitReady(declarative.DesiredFailedReason, "spec.image is empty")
	testenv.Eventually(t, "a second Warning Event", func() bool { return countEvents(t, r, declarative.DesiredFailedReason) == 2 })

	r.change(func() { r.fail = nil })
	r.waitReady(declarative.ChildrenReadyReason, "all 1 children are ready")
}

func TestDesiredPanicSetsReadyFalse(t *testing.T) {
	testenv.InBothForms(t, testDesiredPanicSetsReadyFalse)
}

func testDesiredPanicSetsReadyFalse(t *testing.T) {
	r := startGraph(t, func() []any { panic("chaos: Desired panics\ngoroutine 1 [running]:") })
	c := r.waitReady(declarative.DesiredFailedReason, "Desired panicked: chaos: Desired panics")
	if c.Status != metav1.ConditionFalse || strings.Contains(c.Message, "goroutine") {
		t.Errorf("Ready = %+v, want False, on one line", c)
	}
	testenv.Eventually(t, "a Warning Event "+declarative.DesiredFailedReason, func() bool { return hasEvent(t, r, declarative.DesiredFailedReason) })
	testenv.Eventually(t, "the panic is counted", func() bool { return panics(t, r) > 0 })
}
