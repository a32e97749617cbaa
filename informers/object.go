package informers

import (
	"fmt"
	"reflect"

	"github.com/converge-dev/converge/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Mode says how a cached type is decoded and stored.
type Mode int

const (
	// Typed stores Go structs registered in the scheme.
	Typed Mode = iota
	// Unstructured stores *unstructured.Unstructured.
	Unstructured
	// Metadata stores *metav1.PartialObjectMetadata: metadata only.
	Metadata
)

// String returns "typed", "unstructured" or "metadata".
func (m Mode) String() string {
	switch m {
	case Typed:
		return "typed"
	case Unstructured:
		return "unstructured"
	case Metadata:
		return "metadata"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// modeOf tells the mode from the Go type of obj.
func modeOf(obj runtime.Object) Mode {
	switch obj.(type) {
	case *unstructured.Unstructured:
		return Unstructured
	case *metav1.PartialObjectMetadata:
		return Metadata
	}
	return Typed
}

// newObject returns a new, empty T: T must be a pointer to a struct.
func newObject[T object.Object]() (T, error) {
	var zero T
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		return zero, fmt.Errorf("informers: type %v is not a pointer to a struct", rt)
	}
	return reflect.New(rt.Elem()).Interface().(T), nil
}

// kindFor returns the GroupVersionKind of obj from the scheme, or want when obj
// is unstructured or metadata (which carry no kind of their own).
func kindFor(scheme *runtime.Scheme, obj runtime.Object, want schema.GroupVersionKind) (schema.GroupVersionKind, error) {
	if modeOf(obj) != Typed {
		if want.Empty() || want.Kind == "" {
			return want, fmt.Errorf("informers: %T needs Selection.Kind: unstructured and metadata objects carry no kind of their own", obj)
		}
		return want, nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("informers: %T is not registered in the scheme (add its API group with AddToScheme): %w", obj, err)
	}
	if !want.Empty() {
		for _, gvk := range gvks {
			if gvk == want {
				return gvk, nil
			}
		}
		return schema.GroupVersionKind{}, fmt.Errorf("informers: %T is registered as %v, not %v", obj, gvks, want)
	}
	return gvks[0], nil
}

// describe names a kind for messages: "Pod" for core, "apps/v1 Deployment" otherwise.
func describe(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + " " + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + " " + gvk.Kind
}
