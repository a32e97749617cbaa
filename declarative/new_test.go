package declarative_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// unregistered is a kind no scheme knows.
type unregistered struct{ corev1.Secret }

func newManager(t *testing.T) *framework.Manager {
	t.Helper()
	mgr, err := framework.NewManager(&rest.Config{Host: "http://127.0.0.1:1"}, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

func noChildren(context.Context, *corev1.ConfigMap) (declarative.State, error) {
	return declarative.State{}, nil
}

func TestNewReportsConfigurationErrors(t *testing.T) {
	r := declarative.Func[*corev1.ConfigMap](noChildren)
	secrets := []object.Object{&corev1.Secret{}}
	for _, tc := range []struct {
		name string
		new  func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error)
		want []string // substrings of the error
	}{
		{"nil manager", func(*framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(nil, r, declarative.Options{ChildKinds: secrets})
		}, []string{"manager and reconciler must not be nil"}},
		{"typed nil reconciler", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, declarative.Func[*corev1.ConfigMap](nil), declarative.Options{ChildKinds: secrets})
		}, []string{"manager and reconciler must not be nil"}},
		{"no children", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{})
		}, []string{"Options.ChildKinds is empty"}},
		{"nil child", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{ChildKinds: []object.Object{(*corev1.Secret)(nil)}})
		}, []string{"Options.ChildKinds holds a nil object"}},
		{"unregistered child", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{ChildKinds: []object.Object{&unregistered{}}})
		}, []string{"child type *declarative_test.unregistered is not registered"}},
		{"long field manager", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{ChildKinds: secrets, FieldManager: strings.Repeat("m", 129)})
		}, []string{"Options.FieldManager", "longer than 128 characters"}},
		{"unqualified finalizer", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{ChildKinds: secrets, Finalizer: "cleanup"})
		}, []string{`Options.Finalizer "cleanup" is not a valid finalizer name (it has no domain)`}},
		{"invalid finalizer", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{ChildKinds: secrets, Finalizer: "not a/valid/finalizer name!"})
		}, []string{`Options.Finalizer "not a/valid/finalizer name!" is not a valid finalizer name (a valid label key must consist of alphanumeric characters`, "like example.com/cleanup"}},
		{"conflict reason with a space", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{ChildKinds: secrets, Conflict: declarative.ConflictOptions{Reason: "Resource exists"}})
		}, []string{`Options.Conflict.Reason "Resource exists" must be UpperCamelCase`}},
		{"long conflict reason", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{ChildKinds: secrets, Conflict: declarative.ConflictOptions{Reason: "E" + strings.Repeat("x", 128)}})
		}, []string{"Options.Conflict.Reason", "at most 128 characters"}},
		{"every broken rule at once", func(mgr *framework.Manager) (*declarative.Declarative[*corev1.ConfigMap], error) {
			return declarative.New(mgr, r, declarative.Options{
				ChildKinds:   []object.Object{nil, &unregistered{}},
				FieldManager: strings.Repeat("m", 129), Finalizer: "cleanup",
			})
		}, []string{"holds a nil object", "not registered", "longer than 128", "domain-qualified name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr := newManager(t)
			d, err := tc.new(mgr)
			if d != nil {
				t.Error("New returned a Declarative with its error")
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("New error %v, want one containing %q", err, w)
				}
			}
			// A broken configuration watches nothing: no informer is made.
			if stats := mgr.Cache().Stats(); len(stats) != 0 {
				t.Errorf("the cache holds %d informers after a failed New, want none: %+v", len(stats), stats)
			}
		})
	}
}

// The default finalizer is a valid name whatever the field manager.
func TestDefaultFinalizerIsValidForAnyFieldManager(t *testing.T) {
	for _, fm := range []string{"converge-site", "example.com/site controller", "_" + strings.Repeat("x", 100) + "-"} {
		if _, err := declarative.New(newManager(t), declarative.Func[*corev1.ConfigMap](noChildren), declarative.Options{ChildKinds: []object.Object{&corev1.Secret{}}, FieldManager: fm}); err != nil {
			t.Errorf("FieldManager %q: %v", fm, err)
		}
	}
}

func TestUnregisteredParentIsReported(t *testing.T) {
	_, err := declarative.New(newManager(t), declarative.Func[*unregistered](func(context.Context, *unregistered) (declarative.State, error) {
		return declarative.State{}, nil
	}), declarative.Options{ChildKinds: []object.Object{&corev1.Secret{}}})
	if err == nil || !strings.Contains(err.Error(), "parent type *declarative_test.unregistered is not registered") {
		t.Errorf("New error %v, want the parent type named as unregistered", err)
	}
}

func TestNewWatchesEveryChildKind(t *testing.T) {
	for _, tc := range []struct {
		name     string
		required []object.Object
		want     []string // the kinds of the informers once the controller is built
	}{
		{"required kinds, from the build", []object.Object{&corev1.Secret{}, &corev1.Service{}}, []string{"ConfigMap", "Secret", "Service"}},
		// Those are made when the controller starts (see
		// TestOptionalKinds...): the kind may not be served.
		{"optional kinds, not before the start", nil, []string{"ConfigMap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr := newManager(t)
			d, err := declarative.New(mgr, declarative.Func[*corev1.ConfigMap](noChildren), declarative.Options{
				ChildKinds: []object.Object{&corev1.Secret{}, &corev1.Service{}}, RequiredKinds: tc.required,
			})
			if err != nil {
				t.Fatal(err)
			}
			srcs, err := d.Sources()
			if err != nil {
				t.Fatal(err)
			}
			if len(srcs) != 4 {
				t.Errorf("Sources returned %d sources, want two per child kind (4): in the manager's own cluster and in the others", len(srcs))
			}
			if stats := mgr.Cache().Stats(); len(stats) != 0 {
				t.Errorf("New made %d informers, want none (the controller's sources make them): %+v", len(stats), stats)
			}
			if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "parents", framework.ControllerOptions{}).Complete(d); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, st := range mgr.Cache().Stats() {
				kinds = append(kinds, st.Kind.Kind)
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, tc.want) {
				t.Errorf("the controller's informers are of %v, want %v", kinds, tc.want)
			}
		})
	}
}

func TestRequiredKindsMustBeChildren(t *testing.T) {
	_, err := declarative.New(newManager(t), declarative.Func[*corev1.ConfigMap](noChildren), declarative.Options{
		ChildKinds: []object.Object{&corev1.Secret{}}, RequiredKinds: []object.Object{&corev1.Service{}, nil},
	})
	for _, want := range []string{"Options.RequiredKinds holds kind Service, which Options.ChildKinds does not list", "Options.RequiredKinds holds a nil object"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error %v, want one saying %q", err, want)
		}
	}
}
