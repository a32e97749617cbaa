package controllerutil

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HasFinalizer reports whether obj lists finalizer.
func HasFinalizer(obj metav1.Object, finalizer string) bool {
	return slices.Contains(obj.GetFinalizers(), finalizer)
}

// AddFinalizer adds finalizer to obj unless it is there, and reports whether
// obj changed.
func AddFinalizer(obj metav1.Object, finalizer string) bool {
	if HasFinalizer(obj, finalizer) {
		return false
	}
	obj.SetFinalizers(append(obj.GetFinalizers(), finalizer))
	return true
}

// RemoveFinalizer removes every occurrence of finalizer from obj, and
// reports whether obj changed.
func RemoveFinalizer(obj metav1.Object, finalizer string) bool {
	cur := obj.GetFinalizers()
	kept := slices.DeleteFunc(slices.Clone(cur), func(f string) bool { return f == finalizer })
	if len(kept) == len(cur) {
		return false
	}
	obj.SetFinalizers(kept)
	return true
}
