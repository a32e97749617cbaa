package declarative

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// pointerText encodes itself with a pointer receiver.
type pointerText struct{ v string }

func (p *pointerText) MarshalText() ([]byte, error) { return []byte("text:" + p.v), nil }

type inner struct {
	Shared string `json:"shared,omitempty"`
	Only   int    `json:"only"`
}

// widgetSpec is a custom resource's spec written as kube-api-linter
// recommends: optional structs with omitzero.
type widgetSpec struct {
	*inner `json:",inline"`
	Shared string      `json:"shared"`
	Size   sizeSpec    `json:"size,omitzero"`
	Policy policySpec  `json:"policy,omitzero"`
	Text   pointerText `json:"text"`
	Blob   []byte      `json:"blob,omitempty"`
	Skip   string      `json:"-"`
	hidden string
}

type sizeSpec struct {
	Min int32 `json:"min,omitempty"`
	Max int32 `json:"max,omitempty"`
}

type policySpec struct {
	Mode string `json:"mode,omitempty"`
}

func TestSetFieldsLeavesOutWhatIsNotSet(t *testing.T) {
	replicas := int32(0)
	for _, tc := range []struct {
		name string
		obj  any
		want string
	}{
		{
			"a Service port without targetPort",
			&corev1.Service{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "web"},
					Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
				},
			},
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"ports":[{"name":"http","port":80}],"selector":{"app":"web"}}}`,
		},
		{
			"set IntOrString and Quantity values",
			&corev1.Container{
				Name:           "c",
				Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
				Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			},
			`{"livenessProbe":{"tcpSocket":{"port":8080}},"name":"c","ports":[{"containerPort":8080}],"readinessProbe":{"httpGet":{"path":"/","port":"http"}},"resources":{"limits":{"cpu":"100m"}}}`,
		},
		{
			"a Deployment without strategy or resources, zero replicas through a pointer, an empty emptyDir",
			&appsv1.Deployment{
				TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: metav1.ObjectMeta{Name: "d"},
				Spec: appsv1.DeploymentSpec{
					Replicas: &replicas,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}},
						Spec: corev1.PodSpec{
							Containers: []corev1.Container{{Name: "c", Image: "i"}},
							Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
						},
					},
				},
			},
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":0,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"image":"i","name":"c"}],"volumes":[{"emptyDir":{},"name":"v"}]}}}}`,
		},
		{
			"omitzero structs, inlined pointers, self-encoding values",
			&widgetSpec{inner: &inner{Shared: "inner", Only: 1}, Shared: "outer", Policy: policySpec{Mode: "x"}, Text: pointerText{v: "t"}, Blob: []byte("hi"), Skip: "s", hidden: "h"},
			`{"blob":"aGk=","only":1,"policy":{"mode":"x"},"shared":"outer","text":"text:t"}`,
		},
		{
			"list elements and map values are set even at zero",
			&struct {
				L []sizeSpec           `json:"l"`
				M map[string]sizeSpec  `json:"m"`
				P map[string]*sizeSpec `json:"p"`
				E []string             `json:"e"`
			}{L: []sizeSpec{{}}, M: map[string]sizeSpec{"a": {}}, P: map[string]*sizeSpec{"nil": nil}, E: []string{}},
			`{"e":[],"l":[{}],"m":{"a":{}},"p":{}}`,
		},
		{
			"an apply configuration",
			corev1ac.ConfigMap("cm", "ns").WithData(map[string]string{"k": ""}),
			`{"apiVersion":"v1","data":{"k":""},"kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns"}}`,
		},
	} {
		got, err := setFields(tc.obj)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		b, _ := json.Marshal(got)
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
	}
}

func TestSetFieldsNumbersAreUnstructured(t *testing.T) {
	got, err := setFields(&struct {
		I uint16            `json:"i"`
		F float32           `json:"f"`
		Q resource.Quantity `json:"q"`
		T metav1.Time       `json:"t"`
	}{I: 3, F: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	m := got.(map[string]any)
	if _, ok := m["i"].(int64); !ok {
		t.Errorf("i is a %T, want int64", m["i"])
	}
	if _, ok := m["f"].(float64); !ok {
		t.Errorf("f is a %T, want float64", m["f"])
	}
	if _, ok := m["q"]; ok {
		t.Errorf("a zero Quantity is sent: %v", m)
	}
	if _, ok := m["t"]; ok {
		t.Errorf("a zero Time is sent: %v", m)
	}
}
