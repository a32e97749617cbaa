package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StaticSite is a website of static pages served by nginx: a ConfigMap holds
// the pages, a Deployment serves them, a Service exposes them, and an
// optional PodDisruptionBudget keeps them up during node drains.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
type StaticSite struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StaticSiteSpec   `json:"spec,omitempty"`
	Status StaticSiteStatus `json:"status,omitempty"`
}

// StaticSiteSpec is the site the user wants.
type StaticSiteSpec struct {
	// Pages maps file names (index.html, about.html) to their content.
	// +kubebuilder:validation:MinProperties=1
	Pages map[string]string `json:"pages"`

	// Replicas is the number of web server pods. Defaults to 1.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image is the web server image. Defaults to nginx:1.27-alpine.
	// +optional
	Image string `json:"image,omitempty"`

	// MinAvailable, when set, adds a PodDisruptionBudget that keeps this
	// many pods running during voluntary disruptions.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`
}

// StaticSiteStatus is what the controller observed.
type StaticSiteStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// URL is where the site is served inside the cluster.
	// +optional
	URL string `json:"url,omitempty"`

	// Conditions: Ready is True once every child is applied.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StaticSiteList is a list of StaticSites.
//
// +kubebuilder:object:root=true
type StaticSiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StaticSite `json:"items"`
}
