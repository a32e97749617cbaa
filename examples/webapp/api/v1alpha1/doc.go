// Package v1alpha1 holds the WebApp API of the webapp example: group
// example.converge.dev, version v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=example.converge.dev
package v1alpha1
