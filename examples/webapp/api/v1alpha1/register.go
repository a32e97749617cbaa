package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of WebApp.
var GroupVersion = schema.GroupVersion{Group: "example.converge.dev", Version: "v1alpha1"}

var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WebApp{}, &WebAppList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme registers WebApp and WebAppList in a scheme.
var AddToScheme = schemeBuilder.AddToScheme
