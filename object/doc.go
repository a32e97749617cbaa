// Package object names the one type every converge API accepts for a
// Kubernetes object: the cache (informers), the write client (client), the
// framework's handlers and the declarative layer all take an [Object].
//
// An Object is anything with object metadata that the apimachinery runtime can
// encode: every typed API struct such as *corev1.Pod, *unstructured.Unstructured
// for kinds without Go types, and *metav1.PartialObjectMetadata for metadata-only
// reads. The package holds no behaviour so that every other package can import it.
package object
