package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/object"
)

// dialKind is the kind of testdata/dials.yaml; dial is its Go type, written
// as kube-api-linter recommends (optional structs omitzero), with the
// fields a typed Go struct sends at zero: an int without omitempty, an
// IntOrString and a Quantity.
var (
	dialKind = schema.GroupVersionKind{Group: "e2e.converge.dev", Version: "v1", Kind: "Dial"}
	dialGVR  = dialKind.GroupVersion().WithResource("dials")
)

type dial struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`
	Spec              dialSpec `json:"spec"`
}

type dialSpec struct {
	Label  string             `json:"label,omitempty"`
	Range  dialRange          `json:"range,omitzero"`
	Port   intstr.IntOrString `json:"port,omitempty"`
	Limit  resource.Quantity  `json:"limit,omitempty"`
	Policy dialPolicy         `json:"policy,omitzero"`
}

type dialRange struct {
	Min int32 `json:"min"`
	Max int32 `json:"max"`
}

type dialPolicy struct {
	Mode string            `json:"mode,omitempty"`
	Tags map[string]string `json:"tags,omitempty"`
}

// webChildren declares, for a StaticSite, a Service, a Deployment and a Dial
// written as typed Go objects, each setting some fields and leaving others
// to their zero values.
func webChildren(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	labels := map[string]string{"app": site.Name}
	return declarative.State{Children: []any{
		&corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: site.Name},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80}}, // no targetPort
			},
		},
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: site.Name},
			Spec: appsv1.DeploymentSpec{ // no strategy
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
						Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
						Containers: []corev1.Container{{ // no resources
							Name: "web", Image: "registry.k8s.io/pause:3.10",
							Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
							// fieldRef is atomic; the server defaults its apiVersion.
							Env:            []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}},
							LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
						}},
					},
				},
			},
		},
		&dial{
			TypeMeta:   metav1.TypeMeta{APIVersion: dialKind.GroupVersion().String(), Kind: dialKind.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: site.Name},
			Spec: dialSpec{ // no port, limit or range.max
				Label:  "web",
				Range:  dialRange{Min: 1},
				Policy: dialPolicy{Mode: "fast", Tags: map[string]string{"tier": "web"}},
			},
		},
	}}, nil
}

// webChildKinds are the kinds webChildren declares.
func webChildKinds() []object.Object {
	d := &unstructured.Unstructured{}
	d.SetGroupVersionKind(dialKind)
	return []object.Object{&corev1.Service{}, &appsv1.Deployment{}, d}
}

// installDials installs the Dial CRD (once per control plane) and waits
// until it is served.
func installDials(ctx context.Context) {
	GinkgoHelper()
	Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "dials.yaml")}})).To(Succeed())
}

// ownedFields returns a function reporting the managedFields (FieldsV1, as
// JSON) that manager's apply owns in the object of resource gvr ns/name.
func ownedFields(ctx context.Context, gvr schema.GroupVersionResource, ns, name, manager string) func() (string, error) {
	return func() (string, error) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		for _, mf := range u.GetManagedFields() {
			if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "" && mf.FieldsV1 != nil {
				return string(mf.FieldsV1.Raw), nil
			}
		}
		return "", nil
	}
}

// appliedChildren returns a function counting the "applied child" lines
// logged for child (its kind and namespace/name).
func appliedChildren(logs *logCapture, child string) func() int {
	return func() int {
		n := 0
		for _, l := range logs.with("msg", "applied child")() {
			if l["child"] == child {
				n++
			}
		}
		return n
	}
}

// patchAs patches the object of resource gvr ns/name as field manager
// "someone-else", with a patch of type pt.
func patchAs(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, pt types.PatchType, patch string) {
	GinkgoHelper()
	_, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, pt, []byte(patch), metav1.PatchOptions{FieldManager: "someone-else"})
	Expect(err).NotTo(HaveOccurred(), "patch %s %s/%s with %s", gvr.Resource, ns, name, patch)
}

var (
	serviceGVR    = corev1.SchemeGroupVersion.WithResource("services")
	deploymentGVR = appsv1.SchemeGroupVersion.WithResource("deployments")
)

var _ = Describe("declarative typed children", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx); installDials(ctx) })

	It("applies only the fields a typed child sets: one apply each over many reconciles, no field of another manager taken", func(ctx SpecContext) {
		logs := &logCapture{}
		desired := newRecorder()
		r := declarative.Func[*v1alpha1.StaticSite](func(ctx context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			desired.record(key(site.Namespace, site.Name))
			return webChildren(ctx, site)
		})
		startDeclarative(ctx, ns, r, webChildKinds(), framework.Options{Logger: logs.logger()})
		site := createSite(ctx, ns, "web", anySpec)
		children := []string{"Service " + ns + "/web", "Deployment " + ns + "/web", "Dial " + ns + "/web"}
		for _, c := range children {
			Eventually(ctx, appliedChildren(logs, c)).WithTimeout(30*time.Second).Should(Equal(1), "%s was not applied", c)
		}

		By("converge's applies own none of the fields they left out")
		Expect(ownedFields(ctx, serviceGVR, ns, site.Name, siteFieldManager)()).NotTo(ContainSubstring(`"f:targetPort"`))
		deployFields, err := ownedFields(ctx, deploymentGVR, ns, site.Name, siteFieldManager)()
		Expect(err).NotTo(HaveOccurred())
		Expect(deployFields).To(ContainSubstring(`"f:readinessProbe"`))
		for _, f := range []string{`"f:strategy"`, `"f:resources"`, `"f:creationTimestamp"`} {
			Expect(deployFields).NotTo(ContainSubstring(f))
		}
		dialFields, err := ownedFields(ctx, dialGVR, ns, site.Name, siteFieldManager)()
		Expect(err).NotTo(HaveOccurred())
		Expect(dialFields).To(ContainSubstring(`"f:min"`))
		for _, f := range []string{`"f:max"`, `"f:port"`, `"f:limit"`} {
			Expect(dialFields).NotTo(ContainSubstring(f))
		}

		By("another manager sets fields converge leaves out")
		patchAs(ctx, serviceGVR, ns, site.Name, types.StrategicMergePatchType, `{"spec":{"ports":[{"port":80,"targetPort":8080}]}}`)
		patchAs(ctx, deploymentGVR, ns, site.Name, types.StrategicMergePatchType, `{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}`)
		patchAs(ctx, dialGVR, ns, site.Name, types.MergePatchType, `{"spec":{"range":{"max":10},"port":8443}}`)

		By("reconciling the parent several times")
		before := desired.count(key(ns, site.Name))()
		for i := range 4 {
			patchSite(ctx, ns, site.Name, `{"metadata":{"annotations":{"poke":"`+strings.Repeat("x", i+1)+`"}}}`)
			Eventually(ctx, desired.count(key(ns, site.Name))).Should(BeNumerically(">", before+i))
		}
		Eventually(ctx, desired.count(key(ns, site.Name))).Should(BeNumerically(">=", before+4))
		Consistently(ctx, func() ([]int, error) {
			svc, err := kube.CoreV1().Services(ns).Get(ctx, site.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, site.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			u, err := dyn.Resource(dialGVR).Namespace(ns).Get(ctx, site.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			max, _, _ := unstructured.NestedInt64(u.Object, "spec", "range", "max")
			port, _, _ := unstructured.NestedInt64(u.Object, "spec", "port")
			recreate := 0
			if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
				recreate = 1
			}
			return []int{svc.Spec.Ports[0].TargetPort.IntValue(), recreate, int(max), int(port)}, nil
		}).WithTimeout(2*time.Second).Should(Equal([]int{8080, 1, 10, 8443}), "another manager's value was reset")
		for _, c := range children {
			Expect(appliedChildren(logs, c)()).To(Equal(1), "%s was applied again although nothing it declares changed", c)
		}
	}, SpecTimeout(3*time.Minute))

	It("reverts drift inside atomic maps and atomic list elements, at every depth, as the server's schema says", func(ctx SpecContext) {
		startDeclarative(ctx, ns, declarative.Func[*v1alpha1.StaticSite](webChildren), webChildKinds(), framework.Options{})
		site := createSite(ctx, ns, "web", anySpec)
		Eventually(ctx, func() error {
			_, err := dyn.Resource(dialGVR).Namespace(ns).Get(ctx, site.Name, metav1.GetOptions{})
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(ctx, func() error {
			_, err := kube.AppsV1().Deployments(ns).Get(ctx, site.Name, metav1.GetOptions{})
			return err
		}).Should(Succeed())
		// Children of one wave are applied at once, in no set order.
		Eventually(ctx, func() error {
			_, err := kube.CoreV1().Services(ns).Get(ctx, site.Name, metav1.GetOptions{})
			return err
		}).Should(Succeed())

		By("another manager adding a key to the Service's selector (mapType atomic)")
		patchAs(ctx, serviceGVR, ns, site.Name, types.MergePatchType, `{"spec":{"selector":{"extra":"x"}}}`)
		Eventually(ctx, func() (map[string]string, error) {
			svc, err := kube.CoreV1().Services(ns).Get(ctx, site.Name, metav1.GetOptions{})
			return svc.Spec.Selector, err
		}).WithTimeout(30*time.Second).Should(Equal(map[string]string{"app": site.Name}), "a key added to an atomic map was not reverted")

		By("another manager adding a key to the pod template's nodeSelector (mapType atomic, in a granular struct)")
		patchAs(ctx, deploymentGVR, ns, site.Name, types.MergePatchType, `{"spec":{"template":{"spec":{"nodeSelector":{"extra":"x"}}}}}`)
		Eventually(ctx, func() (map[string]string, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, site.Name, metav1.GetOptions{})
			return d.Spec.Template.Spec.NodeSelector, err
		}).WithTimeout(30*time.Second).Should(Equal(map[string]string{"kubernetes.io/os": "linux"}), "a nested atomic map was not reverted")

		By("another manager adding an effect to a toleration (an element of an atomic list)")
		patchAs(ctx, deploymentGVR, ns, site.Name, types.JSONPatchType, `[{"op":"add","path":"/spec/template/spec/tolerations/0/effect","value":"NoSchedule"}]`)
		Eventually(ctx, func() ([]corev1.Toleration, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, site.Name, metav1.GetOptions{})
			return d.Spec.Template.Spec.Tolerations, err
		}).WithTimeout(30*time.Second).Should(Equal([]corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}), "a field added inside an atomic list element was not reverted")

		By("another manager adding a key to a custom resource's atomic map")
		patchAs(ctx, dialGVR, ns, site.Name, types.MergePatchType, `{"spec":{"policy":{"tags":{"extra":"x"}}}}`)
		Eventually(ctx, func() (map[string]string, error) {
			u, err := dyn.Resource(dialGVR).Namespace(ns).Get(ctx, site.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			tags, _, err := unstructured.NestedStringMap(u.Object, "spec", "policy", "tags")
			return tags, err
		}).WithTimeout(30*time.Second).Should(Equal(map[string]string{"tier": "web"}), "a key added to a custom resource's atomic map was not reverted")
	}, SpecTimeout(3*time.Minute))
})
