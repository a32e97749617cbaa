package fake

import (
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kind is one kind the server serves.
type kind struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	namespaced bool
	// status says whether the kind has a status subresource.
	status bool
	// proto says whether the kind's objects and lists encode as protobuf.
	proto bool
	// generation says whether the kind keeps metadata.generation.
	generation bool
	// labelsGeneration says whether a change of labels grows the generation
	// too (EndpointSlice's strategy does so).
	labelsGeneration bool
}

func (k *kind) String() string { return k.gvr.GroupResource().String() }

// custom says whether the kind is served as a custom resource: it is not
// built in (it has no protobuf encoding).
func (k *kind) custom() bool { return !k.proto }

// builtinGeneration are the built-in kinds whose API server strategy keeps
// metadata.generation (1 at create, one more with each change outside
// metadata and status); the other built-in kinds, such as ConfigMap,
// Secret, Service or Namespace, keep none (0). Every custom resource keeps
// one.
var builtinGeneration = map[schema.GroupKind]bool{
	{Kind: "Pod"}:                                                                     true,
	{Kind: "ReplicationController"}:                                                   true,
	{Group: "apps", Kind: "Deployment"}:                                               true,
	{Group: "apps", Kind: "ReplicaSet"}:                                               true,
	{Group: "apps", Kind: "StatefulSet"}:                                              true,
	{Group: "apps", Kind: "DaemonSet"}:                                                true,
	{Group: "batch", Kind: "Job"}:                                                     true,
	{Group: "batch", Kind: "CronJob"}:                                                 true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                    true,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:                           true,
	{Group: "networking.k8s.io", Kind: "Ingress"}:                                     true,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                               true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:                                true,
}

// builtinLabelsGeneration are the built-in kinds whose generation also grows
// when only their labels change.
var builtinLabelsGeneration = map[schema.GroupKind]bool{
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}: true,
}

// builtinClusterScoped are the built-in kinds that are not namespaced.
var builtinClusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:  true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "authentication.k8s.io", Kind: "TokenReview"}:                             true,
	{Group: "authentication.k8s.io", Kind: "SelfSubjectReview"}:                       true,
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:                      true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}:                  true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectRulesReview"}:                   true,
}

// kinds indexes the kinds a server serves.
type kinds struct {
	byGVK map[schema.GroupVersionKind]*kind
	byGVR map[schema.GroupVersionResource]*kind
}

// newKinds collects the kinds of s that have object metadata and a list kind.
func newKinds(s *runtime.Scheme, clusterScoped, noStatus map[schema.GroupKind]bool) kinds {
	ks := kinds{byGVK: map[schema.GroupVersionKind]*kind{}, byGVR: map[schema.GroupVersionResource]*kind{}}
	all := s.AllKnownTypes()
	for gvk, t := range all {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if _, ok := all[listGVK]; !ok {
			continue
		}
		obj, err := s.New(gvk)
		if err != nil {
			continue
		}
		if _, err := meta.Accessor(obj); err != nil {
			continue
		}
		if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
			continue
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		status, hasStatus := t.FieldByName("Status")
		k := &kind{
			gvk:        gvk,
			gvr:        gvr,
			namespaced: !builtinClusterScoped[gvk.GroupKind()] && !clusterScoped[gvk.GroupKind()],
			status:     hasStatus && status.Type.Kind() == reflect.Struct && !noStatus[gvk.GroupKind()],
			proto:      isProto(obj),
		}
		k.generation = k.custom() || builtinGeneration[gvk.GroupKind()]
		k.labelsGeneration = builtinLabelsGeneration[gvk.GroupKind()]
		ks.byGVK[gvk] = k
		ks.byGVR[gvr] = k
	}
	return ks
}

// isProto reports whether obj has a protobuf encoding, as the built-in
// types do.
func isProto(obj runtime.Object) bool {
	_, ok := obj.(runtime.ProtobufMarshaller)
	return ok
}

// groupVersions returns the group versions served, sorted, the legacy core
// group ("" v1) first.
func (ks kinds) groupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for gvk := range ks.byGVK {
		if gv := gvk.GroupVersion(); !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersion) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return out
}
