// Package api holds DB, the custom resource the ported bug patterns
// reconcile: a database with a replica count, as the operators the bugs
// come from manage.
package api

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// GroupVersion is DB's group and version.
var GroupVersion = schema.GroupVersion{Group: "bugs.converge.dev", Version: "v1"}

// DB is a database.
type DB struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DBSpec   `json:"spec,omitempty"`
	Status            DBStatus `json:"status,omitempty"`
}

// DBSpec is a DB's desired state.
type DBSpec struct {
	Replicas int32 `json:"replicas,omitempty"`
}

// DBStatus is a DB's observed state.
type DBStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	Replicas           int32 `json:"replicas,omitempty"`
}

// DBList is a list of DBs.
type DBList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DB `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (in *DB) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy returns a deep copy of in.
func (in *DB) DeepCopy() *DB {
	if in == nil {
		return nil
	}
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *DBList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]DB, len(in.Items))
	for i := range in.Items {
		out.Items[i] = *in.Items[i].DeepCopy()
	}
	return &out
}

// NewScheme returns a scheme of client-go's built-in types and DB.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypes(GroupVersion, &DB{}, &DBList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return s
}

// New returns a DB named ns/name with replicas.
func New(ns, name string, replicas int32) *DB {
	return &DB{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: DBSpec{Replicas: replicas}}
}

// ControllerRef returns an owner reference making db its object's
// controller.
func ControllerRef(db *DB) metav1.OwnerReference {
	return *metav1.NewControllerRef(db, GroupVersion.WithKind("DB"))
}

// CRD returns DB's CustomResourceDefinition, for a test control plane:
// namespaced, served and stored as v1, with a status subresource.
func CRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "dbs." + GroupVersion.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: GroupVersion.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "dbs", Singular: "db", Kind: "DB", ListKind: "DBList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: GroupVersion.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true),
				}},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
