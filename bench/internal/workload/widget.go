package workload

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WidgetGroupVersion is the API group and version of the benchmark's custom
// resource.
var WidgetGroupVersion = schema.GroupVersion{Group: "bench.converge.dev", Version: "v1"}

// Widget is the benchmark's custom resource: a typed Go struct, as a
// kubebuilder project has for each of its kinds.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec,omitempty"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is what a Widget asks for.
type WidgetSpec struct {
	// Gen is the field the benchmark driver changes; contenders report it.
	Gen         int64             `json:"gen"`
	Replicas    int32             `json:"replicas,omitempty"`
	Image       string            `json:"image,omitempty"`
	Description string            `json:"description,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Config      map[string]string `json:"config,omitempty"`
	Ports       []WidgetPort      `json:"ports,omitempty"`
}

// WidgetPort is one port of a Widget.
type WidgetPort struct {
	Name     string `json:"name"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// WidgetStatus is what was observed of a Widget.
type WidgetStatus struct {
	Phase              string `json:"phase,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// AddToScheme registers Widget, App and their lists.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(WidgetGroupVersion, &Widget{}, &WidgetList{}, &App{}, &AppList{})
	metav1.AddToGroupVersion(s, WidgetGroupVersion)
	return nil
}

// DeepCopyInto copies w into out.
func (w *Widget) DeepCopyInto(out *Widget) {
	*out = *w
	out.TypeMeta = w.TypeMeta
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	w.Spec.DeepCopyInto(&out.Spec)
	out.Status = w.Status
}

// DeepCopy returns a copy of w.
func (w *Widget) DeepCopy() *Widget {
	if w == nil {
		return nil
	}
	out := new(Widget)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	if c := w.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies s into out.
func (s *WidgetSpec) DeepCopyInto(out *WidgetSpec) {
	*out = *s
	if s.Tags != nil {
		out.Tags = make([]string, len(s.Tags))
		copy(out.Tags, s.Tags)
	}
	if s.Config != nil {
		out.Config = make(map[string]string, len(s.Config))
		for k, v := range s.Config {
			out.Config[k] = v
		}
	}
	if s.Ports != nil {
		out.Ports = make([]WidgetPort, len(s.Ports))
		copy(out.Ports, s.Ports)
	}
}

// DeepCopyInto copies l into out.
func (l *WidgetList) DeepCopyInto(out *WidgetList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Widget, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *WidgetList) DeepCopy() *WidgetList {
	if l == nil {
		return nil
	}
	out := new(WidgetList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	if c := l.DeepCopy(); c != nil {
		return c
	}
	return nil
}
