package declarative

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi3"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/converge-dev/converge/object"
)

// schemas holds the structure of every child kind as the API server
// publishes it (OpenAPI v3, one document per group and version, custom
// resources included), read per group version on first use and again once
// schemaTTL has passed, for
// deciding as server-side apply does whether an apply would change a
// child (see sameAfterApply).
//
// It is safe for concurrent use.
type schemas struct {
	// root reads the published documents; nil reads none, as for a server
	// that publishes none.
	root openapi3.Root
	// builtin returns the converter of the built-in kinds with the schemas
	// client-go carries, for servers that publish none. It is called only
	// then: building it parses every built-in schema (about 20 MiB
	// allocated, 0.15 s of CPU).
	builtin func() managedfields.TypeConverter
	mu      sync.Mutex
	// byGV holds the converter of each group version read so far, and
	// when it was read; mu guards it.
	byGV map[schema.GroupVersion]readSchema
	// now is time.Now, or a test's clock.
	now func() time.Time
}

// schemaTTL is how long a group version's schema is used before it is read
// again: a CRD's schema may change while converge runs (a field made
// atomic, say).
const schemaTTL = 5 * time.Minute

type readSchema struct {
	tc managedfields.TypeConverter
	at time.Time
}

// forGV returns the converter of group version gv, reading its document
// from the API server on first use and once schemaTTL has passed. For a server that publishes no OpenAPI
// v3 (framework/fake) it is the one framework/fake itself uses: client-go's
// schemas for the built-in kinds, and for other kinds the deduced one, for
// which maps are granular and lists atomic.
func (s *schemas) forGV(gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	if r, ok := s.byGV[gv]; ok && now().Sub(r.at) < schemaTTL {
		return r.tc, nil
	}
	tc, err := s.readLocked(gv)
	if err != nil {
		return nil, err
	}
	if s.byGV == nil {
		s.byGV = map[schema.GroupVersion]readSchema{}
	}
	s.byGV[gv] = readSchema{tc: tc, at: now()}
	return tc, nil
}

func (s *schemas) readLocked(gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	if s.root == nil {
		return unpublished{builtin: s.builtin(), deduced: managedfields.NewDeducedTypeConverter()}, nil
	}
	doc, err := s.root.GVSpec(gv)
	var missing *openapi3.GroupVersionNotFoundError
	switch {
	case apierrors.IsNotFound(err) || errors.As(err, &missing):
		return unpublished{builtin: s.builtin(), deduced: managedfields.NewDeducedTypeConverter()}, nil
	case err != nil:
		return nil, fmt.Errorf("read the OpenAPI v3 schema of %v: %w", gv, err)
	case doc.Components == nil:
		return nil, fmt.Errorf("the OpenAPI v3 schema of %v has no components", gv)
	}
	tc, err := managedfields.NewTypeConverter(doc.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("the OpenAPI v3 schema of %v: %w", gv, err)
	}
	return tc, nil
}

// forget drops what is known of gv, so that the next use reads it again: a
// CRD's schema may have changed.
func (s *schemas) forget(gv schema.GroupVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byGV, gv)
}

// sameAfterApply reports whether server-side applying want over live would
// leave live as it is, deciding as the API server does from the kind's
// schema: maps and structs marked atomic (a Service's selector, a pod's
// nodeSelector) and atomic lists (tolerations, args), elements included,
// are replaced by what want declares, so a key or field another manager
// added to them is a change; granular maps and associative lists (keyed by
// their x-kubernetes-list-map-keys) keep what others added. It never
// modifies live, which may be shared with the cache.
//
// An error (the schema cannot be read, or does not describe an object)
// answers false: an apply that changes nothing costs a request, a wrong
// true would leave drift in place.
func (s *schemas) sameAfterApply(live object.Object, want *unstructured.Unstructured) bool {
	gvk := want.GroupVersionKind()
	tc, err := s.forGV(gvk.GroupVersion())
	if err != nil {
		return false
	}
	lu, err := toMap(live)
	if err != nil {
		return false
	}
	// Cached typed objects carry no apiVersion and kind; a shallow copy
	// takes them without writing to the cached object's map.
	lu = maps.Clone(lu)
	lu["apiVersion"], lu["kind"] = want.GetAPIVersion(), want.GetKind()
	lv, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: lu}, typed.AllowDuplicates)
	if err != nil {
		s.forget(gvk.GroupVersion())
		return false
	}
	wv, err := tc.ObjectToTyped(want, typed.AllowDuplicates)
	if err != nil {
		s.forget(gvk.GroupVersion())
		return false
	}
	merged, err := lv.Merge(wv)
	if err != nil {
		return false
	}
	cmp, err := lv.Compare(merged)
	return err == nil && cmp.IsSame()
}

// unpublished converts objects of a server that publishes no schema: with
// builtin where it knows the kind, deduced otherwise.
type unpublished struct{ builtin, deduced managedfields.TypeConverter }

var _ managedfields.TypeConverter = unpublished{}

func (u unpublished) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if tv, err := u.builtin.ObjectToTyped(obj, opts...); err == nil {
		return tv, nil
	}
	return u.deduced.ObjectToTyped(obj, opts...)
}

func (u unpublished) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return u.deduced.TypedToObject(v)
}
