package explore

import (
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// copyScheme returns a scheme of its own for one manager, holding src's
// known types: client-go's built-in types as clientgoscheme.AddToScheme
// registers them (conversions and defaults included), every other type
// of src by name, with metav1's types and options conversions in its
// group version, as metav1.AddToGroupVersion registers them. A Setup
// that adds types to its manager's scheme (as a program's setup may,
// before any goroutine reads it) then writes only to this copy, while
// the fake API server, the scenario and other managers read src.
func copyScheme(src *runtime.Scheme) (*runtime.Scheme, error) {
	dst := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(dst); err != nil {
		return nil, err
	}
	gvs := map[schema.GroupVersion]bool{}
	for gvk, t := range src.AllKnownTypes() {
		if dst.Recognizes(gvk) {
			continue
		}
		obj, ok := reflect.New(t).Interface().(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("scheme type %v of %s is not a runtime.Object", t, gvk)
		}
		dst.AddKnownTypeWithName(gvk, obj)
		if gvk.Version != runtime.APIVersionInternal {
			gvs[gvk.GroupVersion()] = true
		}
	}
	for gv := range gvs {
		metav1.AddToGroupVersion(dst, gv)
	}
	return dst, nil
}
