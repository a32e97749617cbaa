package declarative_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// newDeclarative returns a declarative reconciler of ConfigMap parents with
// Secret children, on a manager whose API server does not exist: what these
// tests reconcile must never reach it.
func newDeclarative(t *testing.T, r declarative.Reconciler[*corev1.ConfigMap]) *declarative.Declarative[*corev1.ConfigMap] {
	t.Helper()
	mgr, err := framework.NewManager(&rest.Config{Host: "http://127.0.0.1:1"}, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := declarative.New(mgr, r, declarative.Options{ChildKinds: []object.Object{&corev1.Secret{}}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parent() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "uid-1"}}
}

func TestDesiredErrorsReachTheFrameworkUnchanged(t *testing.T) {
	plain := errors.New("the database is down")
	terminal := reconcile.Terminal(fmt.Errorf("spec.size %d: %w", -1, errors.New("must not be negative")))
	for _, want := range []error{plain, terminal} {
		d := newDeclarative(t, declarative.Func[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (declarative.State, error) {
			return declarative.State{Events: []declarative.Event{{Reason: "NotRecorded"}}}, want
		}))
		res, err := d.Reconcile(t.Context(), parent())
		if err != want { //nolint:errorlint // the very error, not a wrapping of it
			t.Errorf("Reconcile returned %v, want Desired's error %v itself", err, want)
		}
		if reconcile.IsTerminal(err) != reconcile.IsTerminal(want) {
			t.Errorf("IsTerminal(%v) = %v, want %v", err, reconcile.IsTerminal(err), reconcile.IsTerminal(want))
		}
		if res != (reconcile.Result{}) {
			t.Errorf("Reconcile result %+v, want zero", res)
		}
	}
}

func TestKeepChildrenWithChildrenIsATerminalError(t *testing.T) {
	d := newDeclarative(t, declarative.Func[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (declarative.State, error) {
		return declarative.State{KeepChildren: true, Children: []any{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}}}, nil
	}))
	_, err := d.Reconcile(t.Context(), parent())
	if !reconcile.IsTerminal(err) {
		t.Fatalf("Reconcile returned %v, want a terminal error", err)
	}
	for _, s := range []string{"ConfigMap ns/parent", "KeepChildren", "1 Children"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

func TestKeepChildrenWithoutStatusWritesNothing(t *testing.T) {
	d := newDeclarative(t, declarative.Func[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (declarative.State, error) {
		return declarative.State{KeepChildren: true, RequeueAfter: 7}, nil
	}))
	// The API server does not exist: any read or write would fail.
	res, err := d.Reconcile(t.Context(), parent())
	if err != nil || res.RequeueAfter != 7 {
		t.Fatalf("Reconcile = %+v, %v; want RequeueAfter 7 and no error", res, err)
	}
}

func TestLiveChildErrors(t *testing.T) {
	if _, err := declarative.LiveChild(t.Context(), &corev1.Secret{}, "s"); err == nil || !strings.Contains(err.Error(), "call it from Desired") {
		t.Errorf("LiveChild outside Desired: got %v, want an error saying to call it from Desired", err)
	}
	if _, err := declarative.LiveChildren(t.Context(), &corev1.Secret{}); err == nil || !strings.Contains(err.Error(), "call it from Desired") {
		t.Errorf("LiveChildren outside Desired: got %v, want an error saying to call it from Desired", err)
	}
	var inDesired []error
	d := newDeclarative(t, declarative.Func[*corev1.ConfigMap](func(ctx context.Context, _ *corev1.ConfigMap) (declarative.State, error) {
		_, err1 := declarative.LiveChild(ctx, &corev1.Pod{}, "p")
		_, err2 := declarative.LiveChildren(ctx, &corev1.Pod{})
		var nilSecret *corev1.Secret
		_, err3 := declarative.LiveChild(ctx, nilSecret, "s")
		inDesired = []error{err1, err2, err3}
		return declarative.State{}, errors.New("stop here")
	}))
	_, _ = d.Reconcile(t.Context(), parent())
	for i, want := range []string{"kind Pod is not in declarative.Options.ChildKinds", "kind Pod is not in declarative.Options.ChildKinds", "example object is nil"} {
		if err := inDesired[i]; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("call %d in Desired: got %v, want an error saying %q", i, err, want)
		}
	}
}

func TestEventWithTypedNilRelated(t *testing.T) {
	var none *corev1.Secret
	d := newDeclarative(t, declarative.Func[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (declarative.State, error) {
		return declarative.State{KeepChildren: true, Events: []declarative.Event{{Reason: "Waiting", Related: none}}}, nil
	}))
	if _, err := d.Reconcile(t.Context(), parent()); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}
