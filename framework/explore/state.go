package explore

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

// Invariant is a property of the cluster a schedule checks.
type Invariant struct {
	// Name says what must hold, in failure reports: "each DB has both
	// Secrets".
	Name string
	// Check returns nil when the property holds in s, else an error
	// saying what breaks it.
	Check func(ctx context.Context, s *Snapshot) error
}

// Write is a write request the controllers or the scenario sent, and how
// the server answered it.
type Write struct {
	// Manager is the manager that sent it: "manager-1", "manager-2" after
	// a restart, ...; empty for the scenario's steps.
	Manager string
	// Verb is create, update, patch, delete or deletecollection.
	Verb string
	// Kind, Namespace, Name and Subresource name the object (Name is empty
	// for a create with generateName and for deletecollection).
	Kind                         schema.GroupVersionKind
	Namespace, Name, Subresource string
	// Code is the answer's HTTP status code; 0 when it got none (the
	// manager had crashed, a Restart fault lost it, or kube-apiserver was
	// down or restarting).
	Code int
	// Injected is the fault that met it, if any: one that answered it
	// instead of the server (Conflict, ServerError), lost it (Restart) or
	// held it (Hold). A Crash after it does not count.
	Injected *Fault

	// attempt numbers a manager's write among the managers' writes (from
	// 1); 0 for the scenario's.
	attempt int
}

// Committed reports whether the write took effect.
func (w Write) Committed() bool { return w.Code >= 200 && w.Code < 300 }

func (w Write) String() string {
	who := w.Manager
	if who == "" {
		who = "scenario"
	}
	s := fmt.Sprintf("%s: %s %s %s", who, w.Verb, w.Kind.GroupVersion(), w.Kind.Kind)
	switch {
	case w.Name != "":
		s += " " + types.NamespacedName{Namespace: w.Namespace, Name: w.Name}.String()
	case w.Namespace != "":
		s += " in " + w.Namespace
	}
	if w.Subresource != "" {
		s += " (" + w.Subresource + ")"
	}
	return s + fmt.Sprintf(" → %d", w.Code)
}

// Snapshot is the cluster as an Invariant sees it: reads go to the API
// server (the fake, or kube-apiserver with Options.Envtest; never to a
// cache), and Writes lists every write so far. A Snapshot is valid during
// its Check only.
type Snapshot struct {
	reader *client.APIReader
	scheme *runtime.Scheme
	writes []Write
	steps  int
}

// Steps returns how many steps of the scenario have been applied: 0 at
// the start, len(Options.Steps) at the end. An invariant that holds only
// once the whole scenario ran checks it.
func (s *Snapshot) Steps() int { return s.steps }

// Writes returns every write the controllers and the scenario sent in the
// schedule so far, in the order the server took them.
func (s *Snapshot) Writes() []Write { return slices.Clone(s.writes) }

// Get returns the object of type T named key, and whether it exists.
func Get[T object.Object](ctx context.Context, s *Snapshot, key types.NamespacedName) (T, bool, error) {
	obj := newObject[T]()
	err := s.reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		var zero T
		return zero, false, nil
	}
	if err != nil {
		var zero T
		return zero, false, fmt.Errorf("get %T %s: %w", obj, key, err)
	}
	return obj, true, nil
}

// List returns the objects of type T that opts select, sorted by namespace
// and name.
func List[T object.Object](ctx context.Context, s *Snapshot, opts ...informers.ListOption) ([]T, error) {
	example := newObject[T]()
	gvk, err := client.KindOf(s.scheme, example)
	if err != nil {
		return nil, err
	}
	listObj, err := s.scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	if err := s.reader.List(ctx, listObj, opts...); err != nil {
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	items := reflect.ValueOf(listObj).Elem().FieldByName("Items")
	out := make([]T, 0, items.Len())
	for i := range items.Len() {
		item := items.Index(i)
		if item.Kind() != reflect.Pointer {
			item = item.Addr()
		}
		out = append(out, item.Interface().(T))
	}
	return out, nil
}

// newObject returns a new T: T must be a pointer to a struct.
func newObject[T object.Object]() T {
	var zero T
	rt := reflect.TypeOf(zero)
	if rt == nil || rt.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("explore: %T is not a pointer to an object type", zero))
	}
	return reflect.New(rt.Elem()).Interface().(T)
}
