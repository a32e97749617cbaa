package controllerutil

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/converge-dev/converge/internal/typednil"
)

// HasFinalizer reports whether obj lists finalizer; a nil obj lists none.
func HasFinalizer(obj metav1.Object, finalizer string) bool {
	return !typednil.Is(obj) && slices.Contains(obj.GetFinalizers(), finalizer)
}

// AddFinalizer adds finalizer to obj unless it is there, and reports whether
// obj changed. It fails, changing nothing, when obj is nil or finalizer is
// not a qualified name ("example.com/cleanup"), which the API server would
// refuse.
func AddFinalizer(obj metav1.Object, finalizer string) (bool, error) {
	if err := typednil.Check("obj", obj); err != nil {
		return false, fmt.Errorf("add finalizer %q: %w", finalizer, err)
	}
	if errs := validation.IsQualifiedName(finalizer); len(errs) > 0 {
		return false, fmt.Errorf("add finalizer %q to %s: not a qualified name: %s", finalizer, describe(obj), strings.Join(errs, "; "))
	}
	if HasFinalizer(obj, finalizer) {
		return false, nil
	}
	obj.SetFinalizers(append(obj.GetFinalizers(), finalizer))
	return true, nil
}

// RemoveFinalizer removes every occurrence of finalizer from obj, and
// reports whether obj changed. It fails when obj is nil.
func RemoveFinalizer(obj metav1.Object, finalizer string) (bool, error) {
	if err := typednil.Check("obj", obj); err != nil {
		return false, fmt.Errorf("remove finalizer %q: %w", finalizer, err)
	}
	cur := obj.GetFinalizers()
	kept := slices.DeleteFunc(slices.Clone(cur), func(f string) bool { return f == finalizer })
	if len(kept) == len(cur) {
		return false, nil
	}
	obj.SetFinalizers(kept)
	return true, nil
}
