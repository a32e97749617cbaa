package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WebApp is a web application with a database schema: a ConfigMap holds its
// settings, a Job migrates the schema for the current image, a Deployment
// runs the image once the migration is complete, a Service exposes it once
// it is available, and an optional PodDisruptionBudget keeps it up during
// node drains.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
type WebApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebAppSpec   `json:"spec,omitempty"`
	Status WebAppStatus `json:"status,omitempty"`
}

// WebAppSpec is the application the user wants.
type WebAppSpec struct {
	// Image is the application's image.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// Migrate is the command that migrates the database schema, run in
	// Image by a Job before the Deployment gets that image. Empty means no
	// migration.
	// +optional
	Migrate []string `json:"migrate,omitempty"`

	// Settings are the application's environment, kept in a ConfigMap.
	// +optional
	Settings map[string]string `json:"settings,omitempty"`

	// Replicas is the number of pods. Defaults to 1.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// MinAvailable, when set, adds a PodDisruptionBudget that keeps this
	// many pods running during voluntary disruptions.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`
}

// WebAppStatus is what the controller observed.
type WebAppStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True once every child is ready, else it names
	// the first child in the way and what it waits for.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WebAppList is a list of WebApps.
//
// +kubebuilder:object:root=true
type WebAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebApp `json:"items"`
}
