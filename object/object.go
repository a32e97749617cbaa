package object

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is a Kubernetes object with metadata: every typed API object,
// *unstructured.Unstructured and *metav1.PartialObjectMetadata.
//
// Objects handed out by the cache are shared with every other reader: treat
// them as read-only and copy before changing them.
type Object interface {
	metav1.Object
	runtime.Object
}
