package workload

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// App is the parents workload's custom resource (apps.bench.converge.dev):
// a parent that declares two children, a ConfigMap holding spec.data and a
// Deployment running spec.image with spec.replicas, and whose status says
// which generation was applied.
type App struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AppSpec   `json:"spec,omitempty"`
	Status AppStatus `json:"status,omitempty"`
}

// AppSpec is what an App asks for.
type AppSpec struct {
	Replicas int32  `json:"replicas"`
	Image    string `json:"image"`
	Data     string `json:"data"`
}

// AppStatus is what a controller wrote about an App: the generation its
// children were applied for, and a Ready condition.
type AppStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// AppList is a list of Apps.
type AppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []App `json:"items"`
}

// AppGVR is the resource of Apps.
var AppGVR = WidgetGroupVersion.WithResource("apps")

// AppReady is the type of the condition every contender sets once both
// children are applied for the App's generation.
const AppReady = "Ready"

// AppLabels are the labels of an App's children and of the Deployment's pods.
func AppLabels(name string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "bench-app", "app.kubernetes.io/instance": name}
}

// AppDataKey is the ConfigMap key that holds spec.data.
const AppDataKey = "data"

// AppContainer is the name of the Deployment's only container.
const AppContainer = "app"

// AppData returns the spec.data of parent i at version v.
func AppData(i int, v int64) string { return fmt.Sprintf("v%d-%s", v, payload(i, 200)) }

// NewApp returns the i-th App: no replicas (no controller-manager runs), one
// of ten images, and about 200 bytes of data.
func NewApp(ns string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": WidgetGroupVersion.String(),
		"kind":       "App",
		"metadata":   map[string]any{"name": Name(Parents, i), "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(0),
			"image":    fmt.Sprintf("registry.example.com/apps/app:1.%d", i%10),
			"data":     AppData(i, 0),
		},
	}}
}

// AppCRD returns the CustomResourceDefinition of Apps.
func AppCRD() *unstructured.Unstructured {
	str := map[string]any{"type": "string"}
	integer := map[string]any{"type": "integer"}
	condition := map[string]any{
		"type":     "object",
		"required": []any{"type", "status", "lastTransitionTime", "reason", "message"},
		"properties": map[string]any{
			"type": str, "status": str, "reason": str, "message": str,
			"lastTransitionTime": map[string]any{"type": "string", "format": "date-time"},
			"observedGeneration": integer,
		},
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "apps." + WidgetGroupVersion.Group},
		"spec": map[string]any{
			"group": WidgetGroupVersion.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "apps", "singular": "app", "kind": "App", "listKind": "AppList"},
			"versions": []any{map[string]any{
				"name": WidgetGroupVersion.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"replicas": integer, "image": str, "data": str,
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{
							"observedGeneration": integer,
							"conditions": map[string]any{
								"type": "array", "items": condition,
								"x-kubernetes-list-type":     "map",
								"x-kubernetes-list-map-keys": []any{"type"},
							},
						}},
					},
				}},
			}},
		},
	}}
}

// DeepCopyInto copies a into out.
func (a *App) DeepCopyInto(out *App) {
	*out = *a
	a.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if a.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(a.Status.Conditions))
		for i := range a.Status.Conditions {
			a.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of a.
func (a *App) DeepCopy() *App {
	if a == nil {
		return nil
	}
	out := new(App)
	a.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (a *App) DeepCopyObject() runtime.Object {
	if c := a.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies l into out.
func (l *AppList) DeepCopyInto(out *AppList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]App, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *AppList) DeepCopy() *AppList {
	if l == nil {
		return nil
	}
	out := new(AppList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *AppList) DeepCopyObject() runtime.Object {
	if c := l.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// ReadyCondition returns the App's Ready condition, or nil.
func (a *App) ReadyCondition() *metav1.Condition {
	for i := range a.Status.Conditions {
		if a.Status.Conditions[i].Type == AppReady {
			return &a.Status.Conditions[i]
		}
	}
	return nil
}
