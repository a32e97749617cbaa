package testapi

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/framework/webhook"
)

// Group is the API group of Sprockets.
const Group = "sprockets.converge.dev"

var (
	// V1 and V2 are the group versions of Sprockets.
	V1 = schema.GroupVersion{Group: Group, Version: "v1"}
	V2 = schema.GroupVersion{Group: Group, Version: "v2"}
)

// AddToScheme registers both versions of Sprocket and their lists.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypeWithName(V1.WithKind("Sprocket"), &SprocketV1{})
	s.AddKnownTypeWithName(V1.WithKind("SprocketList"), &SprocketV1List{})
	s.AddKnownTypeWithName(V2.WithKind("Sprocket"), &Sprocket{})
	s.AddKnownTypeWithName(V2.WithKind("SprocketList"), &SprocketList{})
	metav1.AddToGroupVersion(s, V1)
	metav1.AddToGroupVersion(s, V2)
	return nil
}

// Sprocket is version v2, the hub.
type Sprocket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SprocketSpec `json:"spec,omitempty"`
}

// SprocketSpec is v2's spec.
type SprocketSpec struct {
	Teeth int32 `json:"teeth,omitempty"`
	Paint Paint `json:"paint,omitempty"`
}

// Paint is v2's finish.
type Paint struct {
	Color string `json:"color,omitempty"`
}

// Hub marks v2 as the hub.
func (*Sprocket) Hub() {}

var _ webhook.Hub = (*Sprocket)(nil)

// DeepCopyObject implements runtime.Object.
func (s *Sprocket) DeepCopyObject() runtime.Object { return deepCopy(s) }

// SprocketList is a list of v2 Sprockets.
type SprocketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sprocket `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *SprocketList) DeepCopyObject() runtime.Object { return deepCopy(l) }

// SprocketV1 is version v1, the storage version.
type SprocketV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SprocketV1Spec `json:"spec,omitempty"`
}

// SprocketV1Spec is v1's spec.
type SprocketV1Spec struct {
	Teeth int32  `json:"teeth,omitempty"`
	Color string `json:"color,omitempty"`
}

var _ webhook.Convertible = (*SprocketV1)(nil)

// ConvertTo fills the v2 hub from s.
func (s *SprocketV1) ConvertTo(hub webhook.Hub) error {
	h := hub.(*Sprocket)
	s.ObjectMeta.DeepCopyInto(&h.ObjectMeta)
	h.Spec = SprocketSpec{Teeth: s.Spec.Teeth, Paint: Paint{Color: s.Spec.Color}}
	return nil
}

// ConvertFrom fills s from the v2 hub.
func (s *SprocketV1) ConvertFrom(hub webhook.Hub) error {
	h := hub.(*Sprocket)
	h.ObjectMeta.DeepCopyInto(&s.ObjectMeta)
	s.Spec = SprocketV1Spec{Teeth: h.Spec.Teeth, Color: h.Spec.Paint.Color}
	return nil
}

// DeepCopyObject implements runtime.Object.
func (s *SprocketV1) DeepCopyObject() runtime.Object { return deepCopy(s) }

// SprocketV1List is a list of v1 Sprockets.
type SprocketV1List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SprocketV1 `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *SprocketV1List) DeepCopyObject() runtime.Object { return deepCopy(l) }

// deepCopy copies in through JSON, which these types survive whole: slow,
// and short, as tests want.
func deepCopy[T any, P interface {
	*T
	runtime.Object
}](in P) runtime.Object {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("testapi: copy %T: %v", in, err))
	}
	out := P(new(T))
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("testapi: copy %T: %v", in, err))
	}
	return out
}
