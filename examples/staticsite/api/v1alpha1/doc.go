// Package v1alpha1 holds the StaticSite API of the staticsite example:
// group example.converge.dev, version v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=example.converge.dev
package v1alpha1
