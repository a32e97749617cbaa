package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// The Foo kind of testdata/foos.yaml, k8s.io/sample-controller's, with its
// Go types as sample-controller declares them: status.availableReplicas has
// no omitempty.
var (
	fooGV  = schema.GroupVersion{Group: "e2e.converge.dev", Version: "v1"}
	fooGVR = fooGV.WithResource("foos")
)

const fooFieldManager = "converge-foo" // the declarative default for Foo parents

// Foo asks for a Deployment of its own.
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FooSpec   `json:"spec"`
	Status FooStatus `json:"status"`
}

// FooSpec names the Deployment and its replicas.
type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	Replicas       *int32 `json:"replicas"`
}

// FooStatus mirrors the Deployment's available replicas.
type FooStatus struct {
	AvailableReplicas int32 `json:"availableReplicas"`
}

// FooList is a list of Foos.
type FooList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []Foo `json:"items"`
}

// DeepCopyObject returns a deep copy of f.
func (f *Foo) DeepCopyObject() runtime.Object {
	out := *f
	f.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if f.Spec.Replicas != nil {
		out.Spec.Replicas = new(*f.Spec.Replicas)
	}
	return &out
}

// DeepCopyObject returns a deep copy of l.
func (l *FooList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Foo, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Foo)
	}
	return &out
}

// installFoos installs the Foo CRD (again: it is an idempotent apply).
func installFoos(ctx context.Context) {
	GinkgoHelper()
	Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{filepath.Join("testdata", "foos.yaml")}})).To(Succeed())
}

// startFoos starts a manager for namespace ns running r as the Foo
// controller, with Deployment children.
func startFoos(ctx context.Context, ns string, r declarative.Reconciler[*Foo], opts framework.Options) *framework.Manager {
	GinkgoHelper()
	return startFoosOn(ctx, cfg, ns, r, opts)
}

// startFoosOn is startFoos with a manager on restCfg.
func startFoosOn(ctx context.Context, restCfg *rest.Config, ns string, r declarative.Reconciler[*Foo], opts framework.Options) *framework.Manager {
	GinkgoHelper()
	mgr, err := framework.NewManager(restCfg, managerOptions(ns, opts))
	Expect(err).NotTo(HaveOccurred(), "NewManager")
	mgr.Scheme().AddKnownTypes(fooGV, &Foo{}, &FooList{})
	metav1.AddToGroupVersion(mgr.Scheme(), fooGV)
	d, err := declarative.New(mgr, r, declarative.Options{ChildKinds: []object.Object{&appsv1.Deployment{}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*Foo](mgr, "foo", framework.ControllerOptions{}).Complete(d)).To(Succeed())
	startManager(ctx, mgr)
	return mgr
}

// createFoo creates the Foo ns/name asking for Deployment deployment.
func createFoo(ctx context.Context, ns, name, deployment string, replicas int32) types.UID {
	GinkgoHelper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fooGV.String(), "kind": "Foo",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"deploymentName": deployment, "replicas": int64(replicas)},
	}}
	u, err := dyn.Resource(fooGVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create Foo %s/%s", ns, name)
	return u.GetUID()
}

// fooStatus returns a function reporting the status of Foo ns/name exactly
// as the API server holds it (absent fields absent), for Eventually.
func fooStatus(ctx context.Context, ns, name string) func() (map[string]any, error) {
	return func() (map[string]any, error) {
		u, err := dyn.Resource(fooGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		status, _, err := unstructured.NestedMap(u.Object, "status")
		return status, err
	}
}

// newFooDeployment is the Deployment sample-controller makes for foo.
func newFooDeployment(foo *Foo) *appsv1.Deployment {
	labels := map[string]string{"app": "nginx", "controller": foo.Name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: foo.Spec.DeploymentName, Namespace: foo.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: foo.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
	}
}

// statusWrites counts the writes to the status subresource of Foos that go
// through the transports it wraps (every HTTP client of one rest.Config).
type statusWrites struct{ n atomic.Int64 }

func (w *statusWrites) config() *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/foos/") && strings.HasSuffix(req.URL.Path, "/status") {
				w.n.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

func (w *statusWrites) count() int64 { return w.n.Load() }

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// fooPort is k8s.io/sample-controller's controller ported onto the
// declarative package: the Deployment a Foo names, the Foo's status
// mirroring the Deployment's, an Event each sync, and a Foo without a
// Deployment name reported and left as it is. It records what Desired saw.
type fooPort struct {
	desired *recorder
	// peek is a Deployment name every Desired looks up with LiveChild.
	peek string

	mu sync.Mutex
	// live holds, per Foo, the Deployments LiveChildren showed the last
	// Desired, and peeked what LiveChild said of peek; mu guards both.
	live   map[reconcile.Request][]string
	peeked map[reconcile.Request]error
}

var _ declarative.Reconciler[*Foo] = (*fooPort)(nil)

func newFooPort(peek string) *fooPort {
	return &fooPort{desired: newRecorder(), peek: peek, live: map[reconcile.Request][]string{}, peeked: map[reconcile.Request]error{}}
}

func (p *fooPort) Desired(ctx context.Context, foo *Foo) (declarative.State, error) {
	k := key(foo.Namespace, foo.Name)
	p.desired.record(k)
	all, err := declarative.LiveChildren(ctx, &appsv1.Deployment{})
	if err != nil {
		return declarative.State{}, err
	}
	var names []string
	for _, d := range all {
		names = append(names, d.Name)
	}
	_, peeked := declarative.LiveChild(ctx, &appsv1.Deployment{}, p.peek)
	p.mu.Lock()
	p.live[k], p.peeked[k] = names, peeked
	p.mu.Unlock()

	if foo.Spec.DeploymentName == "" {
		// sample-controller logs "deployment name must be specified" and
		// forgets the Foo. Here its owner is told, and the Deployment it
		// had stays.
		ev := declarative.Event{Type: corev1.EventTypeWarning, Reason: "InvalidSpec", Note: "spec.deploymentName must be set"}
		if len(all) > 0 {
			ev.Related = all[0]
		}
		return declarative.State{KeepChildren: true, Events: []declarative.Event{ev}}, nil
	}
	var available int32
	deploy, err := declarative.LiveChild(ctx, &appsv1.Deployment{}, foo.Spec.DeploymentName)
	switch {
	case err == nil:
		available = deploy.Status.AvailableReplicas
	case !apierrors.IsNotFound(err): // not created yet: none available
		return declarative.State{}, err
	}
	return declarative.State{
		Children: []any{newFooDeployment(foo)},
		Status:   FooStatus{AvailableReplicas: available},
		Events:   []declarative.Event{{Reason: "Synced", Note: "Foo synced successfully"}},
	}, nil
}

func (p *fooPort) seen(k reconcile.Request) func() []string {
	return func() []string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.Clone(p.live[k])
	}
}

func (p *fooPort) peekedErr(k reconcile.Request) func() error {
	return func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.peeked[k]
	}
}

// setAvailable writes the status of Deployment ns/name as the deployment
// controller would (the suite's kube-controller-manager does not run it).
func setAvailable(ctx context.Context, ns, name string, n int32) {
	GinkgoHelper()
	Eventually(ctx, func() error {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		_, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return err
	}).WithTimeout(30*time.Second).Should(Succeed(), "set the status of Deployment %s/%s", ns, name)
}

var _ = Describe("a k8s.io/sample-controller port on the declarative package", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		installFoos(ctx)
		ns = newNamespace(ctx)
	})

	It("writes a status whose field is zero, which the typed parent in the cache shows before it is written, and writes it again when someone removes it", func(ctx SpecContext) {
		desired, writes := newRecorder(), &statusWrites{}
		startFoosOn(ctx, writes.config(), ns, declarative.Func[*Foo](func(_ context.Context, foo *Foo) (declarative.State, error) {
			desired.record(key(foo.Namespace, foo.Name))
			return declarative.State{Children: []any{newFooDeployment(foo)}, Status: FooStatus{AvailableReplicas: 0}}, nil
		}), framework.Options{})
		createFoo(ctx, ns, "zero", "zero-nginx", 1)

		Eventually(ctx, fooStatus(ctx, ns, "zero")).WithTimeout(30*time.Second).Should(HaveKeyWithValue("availableReplicas", BeEquivalentTo(0)),
			"status.availableReplicas: 0 was never written")

		By("someone else removing the field")
		_, err := dyn.Resource(fooGVR).Namespace(ns).Patch(ctx, "zero", types.MergePatchType,
			[]byte(`{"status":{"availableReplicas":null}}`), metav1.PatchOptions{FieldManager: "someone-else"}, "status")
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, fooStatus(ctx, ns, "zero")).WithTimeout(30*time.Second).Should(HaveKeyWithValue("availableReplicas", BeEquivalentTo(0)),
			"the field was not written again")

		By("settling: no reconcile loop on a status that holds, and no write of it")
		k := key(ns, "zero")
		settle := func() int {
			GinkgoHelper()
			last := -1
			Eventually(ctx, func() bool {
				n := desired.count(k)()
				stable := n == last
				last = n
				return stable
			}).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(BeTrue(), "the Foo is reconciled on and on")
			Consistently(ctx, desired.count(k)).WithTimeout(time.Second).Should(Equal(last))
			return last
		}
		settled := settle()
		Expect(writes.count()).To(BeEquivalentTo(2), "the status was written other than once at first and once after its removal")

		By("reconciling the Foo again, for changes to its Deployment")
		for i := range 3 {
			_, err := kube.AppsV1().Deployments(ns).Patch(ctx, "zero-nginx", types.MergePatchType,
				[]byte(fmt.Sprintf(`{"metadata":{"labels":{"touched":"%d"}}}`, i)), metav1.PatchOptions{FieldManager: "someone-else"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(ctx, desired.count(k)).WithTimeout(30 * time.Second).Should(BeNumerically(">", settled))
			settled = settle()
		}
		GinkgoWriter.Printf("%d reconciles, %d status writes\n", settled, writes.count())
		AddReportEntry("Foo reconciles and status writes", fmt.Sprintf("%d reconciles, %d status writes", settled, writes.count()))
		Expect(writes.count()).To(BeEquivalentTo(2), "a status the Foo holds was written again")
	}, SpecTimeout(2*time.Minute))

	It("hands Desired the Deployments the Foo owns, live, so its status follows theirs, and shows no one else's", func(ctx SpecContext) {
		port := newFooPort("foreign")
		startFoos(ctx, ns, port, framework.Options{})
		By("a Deployment of the name Desired peeks at, which no Foo owns, and another Foo")
		foreign := newFooDeployment(&Foo{ObjectMeta: metav1.ObjectMeta{Name: "none", Namespace: ns}, Spec: FooSpec{DeploymentName: "foreign"}})
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, foreign, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		createFoo(ctx, ns, "other", "other-nginx", 1)
		createFoo(ctx, ns, "example", "example-nginx", 2)
		k := key(ns, "example")

		Eventually(ctx, fooStatus(ctx, ns, "example")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("availableReplicas", BeEquivalentTo(0)))
		Eventually(ctx, port.seen(k)).WithTimeout(30 * time.Second).Should(Equal([]string{"example-nginx"}))
		Eventually(ctx, port.seen(key(ns, "other"))).WithTimeout(30 * time.Second).Should(Equal([]string{"other-nginx"}))
		Expect(port.peekedErr(k)()).To(Satisfy(apierrors.IsNotFound), "LiveChild shows a Deployment the Foo does not own")

		By("the Deployment becoming available, as its pods would make it")
		setAvailable(ctx, ns, "example-nginx", 2)
		Eventually(ctx, fooStatus(ctx, ns, "example")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("availableReplicas", BeEquivalentTo(2)))
		setAvailable(ctx, ns, "example-nginx", 1)
		Eventually(ctx, fooStatus(ctx, ns, "example")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("availableReplicas", BeEquivalentTo(1)))
		Expect(fooStatus(ctx, ns, "other")()).To(HaveKeyWithValue("availableReplicas", BeEquivalentTo(0)), "another Foo's status followed this Foo's Deployment")
	}, SpecTimeout(2*time.Minute))

	It("records the Events Desired returns on the Foo, and leaves everything as it is when Desired says KeepChildren", func(ctx SpecContext) {
		port := newFooPort("none")
		startFoos(ctx, ns, port, framework.Options{})
		uid := createFoo(ctx, ns, "example", "example-nginx", 1)
		regardsFoo := And(
			HaveField("Kind", "Foo"), HaveField("APIVersion", fooGV.String()),
			HaveField("Namespace", ns), HaveField("Name", "example"), HaveField("UID", uid),
		)
		Eventually(ctx, eventsIn(ctx, ns)).WithTimeout(30 * time.Second).Should(ContainElement(And(
			HaveField("Type", corev1.EventTypeNormal),
			HaveField("Reason", "Synced"),
			HaveField("Action", "Synced"),
			HaveField("Note", "Foo synced successfully"),
			HaveField("ReportingController", fooFieldManager),
			HaveField("Regarding", regardsFoo),
		)))
		Eventually(ctx, fooStatus(ctx, ns, "example")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("availableReplicas", BeEquivalentTo(0)))
		setAvailable(ctx, ns, "example-nginx", 1)
		Eventually(ctx, fooStatus(ctx, ns, "example")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("availableReplicas", BeEquivalentTo(1)))
		deploy, err := kube.AppsV1().Deployments(ns).Get(ctx, "example-nginx", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("clearing spec.deploymentName: a spec Desired cannot use")
		_, err = dyn.Resource(fooGVR).Namespace(ns).Patch(ctx, "example", types.MergePatchType, []byte(`{"spec":{"deploymentName":""}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, eventsIn(ctx, ns)).WithTimeout(30 * time.Second).Should(ContainElement(And(
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Reason", "InvalidSpec"),
			HaveField("Note", "spec.deploymentName must be set"),
			HaveField("Regarding", regardsFoo),
			HaveField("Related", HaveValue(And(HaveField("Kind", "Deployment"), HaveField("Name", "example-nginx"), HaveField("UID", deploy.UID)))),
		)))
		kept := func() (types.UID, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "example-nginx", metav1.GetOptions{})
			return d.GetUID(), err
		}
		Consistently(ctx, kept).WithTimeout(2*time.Second).Should(Equal(deploy.UID), "the Deployment was not kept")
		Expect(fooStatus(ctx, ns, "example")()).To(HaveKeyWithValue("availableReplicas", BeEquivalentTo(1)), "the status changed")

		By("naming the Deployment again")
		_, err = dyn.Resource(fooGVR).Namespace(ns).Patch(ctx, "example", types.MergePatchType, []byte(`{"spec":{"deploymentName":"example-nginx","replicas":3}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, deploymentReplicas(ctx, ns, "example-nginx")).WithTimeout(30 * time.Second).Should(BeEquivalentTo(3))
		Expect(kept()).To(Equal(deploy.UID))
	}, SpecTimeout(2*time.Minute))
})
