package declarative_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
)

// fleetRig is a hub control plane holding StaticSite parents and a member
// control plane, with its own API server and garbage collector
// (kube-controller-manager), that a manager on the hub engages as
// "edge-1" from a kubeconfig Secret. Its declarative controller declares,
// for each parent, what the test set for its name.
type fleetRig struct {
	t           *testing.T
	mgr         *framework.Manager
	hub, member kubernetes.Interface
	// kubeconfig is the Secret data that reaches the member.
	kubeconfig []byte
	calls      atomic.Int64

	mu       sync.Mutex
	children map[string]func(site *v1alpha1.StaticSite) []any // by parent name; mu guards it
}

func startFleet(t *testing.T) *fleetRig {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	crds := envtest.CRDOptions{Paths: []string{"../examples/staticsite/config/crd"}}
	hubPlane := envtest.New(envtest.Options{CRDs: crds})
	t.Cleanup(func() { _ = hubPlane.Stop() })
	// The member serves the parent's kind too, so that its garbage
	// collector can tell that an owner of that kind is missing there.
	memberPlane := envtest.New(envtest.Options{ControllerManager: true, CRDs: crds})
	t.Cleanup(func() { _ = memberPlane.Stop() })
	hubCfg, err := hubPlane.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	memberCfg, err := memberPlane.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := &fleetRig{t: t, children: map[string]func(*v1alpha1.StaticSite) []any{}}
	r.hub, r.member = kubernetes.NewForConfigOrDie(hubCfg), kubernetes.NewForConfigOrDie(memberCfg)
	if r.kubeconfig, err = envtest.Kubeconfig(memberCfg); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"ns", "fleet-system"} {
		if _, err := r.hub.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.member.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.engage()

	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	p, err := secrets.New(secrets.Options{Namespace: "fleet-system"})
	if err != nil {
		t.Fatal(err)
	}
	r.mgr = testenv.NewManager(t, hubCfg, framework.Options{Scheme: s, Clusters: cluster.Options{Providers: []cluster.Provider{p}}})
	desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
		r.calls.Add(1)
		r.mu.Lock()
		fn := r.children[site.Name]
		r.mu.Unlock()
		var children []any
		if fn != nil {
			children = fn(site)
		}
		return declarative.State{Children: children, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation, Conditions: site.Status.Conditions}}, nil
	}
	d, err := declarative.New(r.mgr, declarative.Func[*v1alpha1.StaticSite](desired), declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.NewBuilder[*v1alpha1.StaticSite](r.mgr, "site", framework.ControllerOptions{}).Complete(d); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, r.mgr)
	testenv.Eventually(t, "cluster edge-1 engaged", func() bool {
		c, err := r.mgr.Clusters().Get("edge-1")
		return err == nil && c.Health().State == cluster.StateReady
	})
	return r
}

// engage writes the kubeconfig Secret that engages the member as edge-1.
func (r *fleetRig) engage() {
	r.t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-system", Name: "edge-1", Labels: map[string]string{secrets.DefaultLabel: "true"}},
		Data:       map[string][]byte{"kubeconfig": r.kubeconfig},
	}
	if _, err := r.hub.CoreV1().Secrets("fleet-system").Create(r.t.Context(), sec, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// declare sets what parent name declares, and reconciles it if it exists.
func (r *fleetRig) declare(name string, children func(site *v1alpha1.StaticSite) []any) {
	r.mu.Lock()
	r.children[name] = children
	r.mu.Unlock()
	if r.parent(name) != nil {
		r.touch(name)
	}
}

// create creates parent ns/name in the hub and returns its UID once the
// manager's cache shows it.
func (r *fleetRig) create(name string) types.UID {
	r.t.Helper()
	site := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "hi"}}}
	if err := r.mgr.Client().Create(r.t.Context(), site); err != nil {
		r.t.Fatal(err)
	}
	return site.UID
}

// touch changes parent name's labels, which reconciles it.
func (r *fleetRig) touch(name string) {
	r.t.Helper()
	patch := `{"metadata":{"labels":{"touched":"` + strings.Repeat("x", int(r.calls.Load()%50)+1) + `"}}}`
	if err := r.mgr.Client().Patch(r.t.Context(), &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, types.MergePatchType, []byte(patch)); err != nil {
		r.t.Fatal(err)
	}
}

// settle returns once a reconcile of parent name that started after the
// call has finished: it touches the parent twice, waiting for Desired each
// time (one worker reconciles a parent at a time, so the second call of
// Desired comes after the end of the first reconcile).
func (r *fleetRig) settle(name string) {
	r.t.Helper()
	for range 2 {
		n := r.calls.Load()
		r.touch(name)
		testenv.Eventually(r.t, "Desired runs again", func() bool { return r.calls.Load() > n })
	}
}

// parent reads parent ns/name from the hub's API server; nil when gone.
func (r *fleetRig) parent(name string) *v1alpha1.StaticSite {
	r.t.Helper()
	site := &v1alpha1.StaticSite{}
	err := r.mgr.APIReader().Get(r.t.Context(), types.NamespacedName{Namespace: "ns", Name: name}, site)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return site
}

// condition returns parent name's condition typ, or nil.
func (r *fleetRig) condition(name, typ string) *metav1.Condition {
	if p := r.parent(name); p != nil {
		for i, c := range p.Status.Conditions {
			if c.Type == typ {
				return &p.Status.Conditions[i]
			}
		}
	}
	return nil
}

// waitCondition waits until parent name's condition typ has reason and a
// message containing part.
func (r *fleetRig) waitCondition(name, typ, reason, part string) {
	r.t.Helper()
	testenv.Eventually(r.t, name+"'s "+typ+" condition is "+reason+" with "+part, func() bool {
		c := r.condition(name, typ)
		return c != nil && c.Reason == reason && strings.Contains(c.Message, part)
	})
}

// memberCM reads ConfigMap ns/name in the member; nil when there is none.
func (r *fleetRig) memberCM(name string) *corev1.ConfigMap {
	r.t.Helper()
	cm, err := r.member.CoreV1().ConfigMaps("ns").Get(r.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return cm
}

// deleteParent deletes parent name and waits until it is gone.
func (r *fleetRig) deleteParent(name string) {
	r.t.Helper()
	if err := r.mgr.Client().Delete(r.t.Context(), &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}); err != nil {
		r.t.Fatal(err)
	}
	testenv.Eventually(r.t, "parent "+name+" gone", func() bool { return r.parent(name) == nil })
}

func fleetConfigMap(name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": v}}
}

func TestChildrenInAnotherCluster(t *testing.T) {
	r := startFleet(t)
	for _, tc := range []struct {
		name string
		test func(t *testing.T, r *fleetRig)
	}{
		{"applies, reverts and deletes them there, tied by the ledger and not by owner references", fleetAppliesRevertsDeletes},
		{"a foreign object of the same name in the member is a conflict, left untouched", fleetForeignObject},
		{"a copied parent-UID label does not make a member object the parent's", fleetCopiedLabel},
		{"someone else's finalizer on a member child holds that child only", fleetForeignFinalizer},
		{"a child in another cluster with owner references, or a typed nil, is refused", fleetRefused},
		{"a child in a cluster not engaged waits for it, and the others are applied", fleetNotEngaged},
		{"while its cluster is away, prune and deletion wait for it, and go on once it is engaged again", fleetClusterAway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			tc.test(t, r)
		})
	}
}

// fleetAppliesRevertsDeletes is the spec "applies, reverts and deletes them there, tied by the ledger and not by owner references".
func fleetAppliesRevertsDeletes(t *testing.T, r *fleetRig) {
	r.declare("app", func(*v1alpha1.StaticSite) []any {
		return []any{
			declarative.NewChild(fleetConfigMap("app-web", "v1")).InCluster("edge-1"),
			declarative.NewChild(fleetConfigMap("app-data", "keep")).InCluster("edge-1").Retain(),
			declarative.NewChild(fleetConfigMap("app-local", "here")),
		}
	})
	uid := r.create("app")
	testenv.Eventually(t, "the member children are created", func() bool { return r.memberCM("app-web") != nil && r.memberCM("app-data") != nil })
	web := r.memberCM("app-web")
	if len(web.OwnerReferences) != 0 || web.Labels[declarative.ParentUIDLabel] != string(uid) || web.Data["k"] != "v1" {
		t.Fatalf("member child = refs %v, labels %v, data %v; want no owner references, the parent's UID label, k=v1", web.OwnerReferences, web.Labels, web.Data)
	}
	if ledger := r.parent("app").Annotations[declarative.LedgerAnnotation]; !strings.Contains(ledger, string(web.UID)+"=ConfigMap@edge-1/ns/app-web") {
		t.Fatalf("ledger %q does not record the member child %s", ledger, web.UID)
	}
	if _, err := r.hub.CoreV1().ConfigMaps("ns").Get(t.Context(), "app-local", metav1.GetOptions{}); err != nil {
		t.Fatalf("the child in the parent's cluster: %v", err)
	}
	if _, err := r.hub.CoreV1().ConfigMaps("ns").Get(t.Context(), "app-web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the member child was created in the hub too: %v", err)
	}

	// Drift in the member is reverted: its change reconciles the parent.
	drifted := web.DeepCopy()
	drifted.Data["k"] = "drifted"
	if _, err := r.member.CoreV1().ConfigMaps("ns").Update(t.Context(), drifted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "drift in the member reverted", func() bool { cm := r.memberCM("app-web"); return cm != nil && cm.Data["k"] == "v1" })

	// The member's garbage collector deletes an object owned by a
	// parent that is not in its cluster (the negative control) ...
	copied := fleetConfigMap("app-gc", "x")
	copied.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "StaticSite", Name: "app", UID: uid}}
	if _, err := r.member.CoreV1().ConfigMaps("ns").Create(t.Context(), copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the member's garbage collector deletes the owner-referenced copy", func() bool { return r.memberCM("app-gc") == nil })
	// ... and never took the children.
	if cm := r.memberCM("app-web"); cm == nil || cm.UID != web.UID {
		t.Fatalf("member child after garbage collection: %v; want the same object (uid %s)", cm, web.UID)
	}

	// Left out: pruned in the member.
	r.declare("app", func(*v1alpha1.StaticSite) []any {
		return []any{
			declarative.NewChild(fleetConfigMap("app-data", "keep")).InCluster("edge-1").Retain(),
			declarative.NewChild(fleetConfigMap("app-more", "v1")).InCluster("edge-1"),
		}
	})
	testenv.Eventually(t, "the member child left out is pruned", func() bool { return r.memberCM("app-web") == nil && r.memberCM("app-more") != nil })
	testenv.Eventually(t, "the ledger forgets it", func() bool {
		return !strings.Contains(r.parent("app").Annotations[declarative.LedgerAnnotation], "app-web")
	})

	// Deleted with the parent, but for the retained one, released.
	data := r.memberCM("app-data")
	r.deleteParent("app")
	testenv.Eventually(t, "the member child is deleted with its parent", func() bool { return r.memberCM("app-more") == nil })
	kept := r.memberCM("app-data")
	if kept == nil || kept.UID != data.UID || kept.Labels[declarative.ParentUIDLabel] != "" || kept.Annotations[declarative.ParentAnnotation] != "" {
		t.Fatalf("retained member child after the parent's deletion: %+v; want the same object, released", kept)
	}
}

// fleetForeignObject is the spec "a foreign object of the same name in the member is a conflict, left untouched".
func fleetForeignObject(t *testing.T, r *fleetRig) {
	foreign, err := r.member.CoreV1().ConfigMaps("ns").Create(t.Context(), fleetConfigMap("taken", "theirs"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.declare("taker", func(*v1alpha1.StaticSite) []any {
		return []any{declarative.NewChild(fleetConfigMap("taken", "ours")).InCluster("edge-1"), declarative.NewChild(fleetConfigMap("taker-ok", "ours")).InCluster("edge-1")}
	})
	r.create("taker")
	r.waitCondition("taker", declarative.ReadyCondition, declarative.ChildFailedReason, "ConfigMap ns/taken already exists and is not managed by StaticSite ns/taker")
	testenv.Eventually(t, "the other member child is applied", func() bool { return r.memberCM("taker-ok") != nil })
	if cm := r.memberCM("taken"); cm.ResourceVersion != foreign.ResourceVersion || cm.Data["k"] != "theirs" {
		t.Fatalf("the foreign object was written to: %+v", cm)
	}
	r.deleteParent("taker")
	if cm := r.memberCM("taken"); cm == nil || cm.ResourceVersion != foreign.ResourceVersion {
		t.Fatalf("the foreign object after the parent's deletion: %+v; want it untouched", cm)
	}
}

// fleetCopiedLabel is the spec "a copied parent-UID label does not make a member object the parent's".
func fleetCopiedLabel(t *testing.T, r *fleetRig) {
	r.declare("orig", func(*v1alpha1.StaticSite) []any {
		return []any{declarative.NewChild(fleetConfigMap("orig-a", "v")).InCluster("edge-1")}
	})
	uid := r.create("orig")
	testenv.Eventually(t, "the member child is created", func() bool { return r.memberCM("orig-a") != nil })
	copied := fleetConfigMap("orig-copy", "mine")
	copied.Labels = r.memberCM("orig-a").Labels // the parent's UID and the manager
	copied.Annotations = map[string]string{declarative.ParentAnnotation: "ns/orig"}
	if _, err := r.member.CoreV1().ConfigMaps("ns").Create(t.Context(), copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if copied.Labels[declarative.ParentUIDLabel] != string(uid) {
		t.Fatalf("copied labels %v do not name the parent %s", copied.Labels, uid)
	}
	// Once the manager's cache of edge-1 shows the copy, a reconcile that
	// starts later lists it as a candidate, and must not prune it.
	edge, err := r.mgr.Clusters().Get("edge-1")
	if err != nil {
		t.Fatal(err)
	}
	inf, err := informers.ForObject(edge.Cache(), &corev1.ConfigMap{}, informers.Selection{
		Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Labels: labels.SelectorFromSet(labels.Set{declarative.ManagerLabel: "converge-staticsite"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the cache of edge-1 shows the copy", func() bool { return inf.Contains(types.NamespacedName{Namespace: "ns", Name: "orig-copy"}) })
	r.settle("orig")
	if r.memberCM("orig-copy") == nil {
		t.Fatal("the copy carrying the parent's labels was pruned")
	}
	r.deleteParent("orig")
	testenv.Eventually(t, "the parent's member child is deleted", func() bool { return r.memberCM("orig-a") == nil })
	if r.memberCM("orig-copy") == nil {
		t.Fatal("the copy carrying the parent's labels was deleted with the parent")
	}
}

// fleetForeignFinalizer is the spec "someone else's finalizer on a member child holds that child only".
func fleetForeignFinalizer(t *testing.T, r *fleetRig) {
	r.declare("fin", func(*v1alpha1.StaticSite) []any {
		return []any{declarative.NewChild(fleetConfigMap("fin-a", "v")).InCluster("edge-1")}
	})
	r.create("fin")
	testenv.Eventually(t, "the member child is created", func() bool { return r.memberCM("fin-a") != nil })
	cm := r.memberCM("fin-a")
	cm.Finalizers = append(cm.Finalizers, "example.com/hold")
	if _, err := r.member.CoreV1().ConfigMaps("ns").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.deleteParent("fin")
	held := r.memberCM("fin-a")
	if held == nil || held.DeletionTimestamp == nil || !slices.Contains(held.Finalizers, "example.com/hold") {
		t.Fatalf("member child after the parent's deletion: %+v; want it being deleted, held by its finalizer", held)
	}
	held.Finalizers = nil
	if _, err := r.member.CoreV1().ConfigMaps("ns").Update(t.Context(), held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the member child is gone once its finalizer is", func() bool { return r.memberCM("fin-a") == nil })
}

// fleetRefused is the spec "a child in another cluster with owner references, or a typed nil, is refused".
func fleetRefused(t *testing.T, r *fleetRig) {
	owned := fleetConfigMap("bad-owned", "v")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "1234"}}
	r.declare("bad", func(*v1alpha1.StaticSite) []any {
		return []any{declarative.NewChild(owned).InCluster("edge-1")}
	})
	r.create("bad")
	r.waitCondition("bad", declarative.ReadyCondition, declarative.ChildGraphReason, "child ConfigMap ns/bad-owned in cluster edge-1 carries owner references, which cannot cross clusters: cluster edge-1's garbage collector would delete it")
	r.declare("bad", func(*v1alpha1.StaticSite) []any {
		return []any{declarative.NewChild((*corev1.ConfigMap)(nil)).InCluster("edge-1")}
	})
	r.waitCondition("bad", declarative.ReadyCondition, declarative.ChildGraphReason, "nil pointer")
	if r.memberCM("bad-owned") != nil {
		t.Fatal("the refused child was created in the member")
	}
	r.deleteParent("bad")
}

// fleetNotEngaged is the spec "a child in a cluster not engaged waits for it, and the others are applied".
func fleetNotEngaged(t *testing.T, r *fleetRig) {
	r.declare("far", func(*v1alpha1.StaticSite) []any {
		return []any{
			declarative.NewChild(fleetConfigMap("far-a", "v")).InCluster("edge-9"),
			declarative.NewChild(fleetConfigMap("far-b", "v")).InCluster("edge-1"),
			declarative.NewChild(fleetConfigMap("far-c", "v")),
		}
	})
	r.create("far")
	r.waitCondition("far", declarative.ReadyCondition, declarative.WaitingReason, "ConfigMap far-a in cluster edge-9 waits for cluster edge-9 (not engaged)")
	testenv.Eventually(t, "the children of the other clusters are applied", func() bool {
		_, err := r.hub.CoreV1().ConfigMaps("ns").Get(t.Context(), "far-c", metav1.GetOptions{})
		return r.memberCM("far-b") != nil && err == nil
	})
	r.deleteParent("far")
}

// fleetClusterAway is the spec "while its cluster is away, prune and deletion wait for it, and go on once it is engaged again".
func fleetClusterAway(t *testing.T, r *fleetRig) {
	r.declare("roam", func(*v1alpha1.StaticSite) []any {
		return []any{
			declarative.NewChild(fleetConfigMap("roam-a", "v")).InCluster("edge-1"),
			declarative.NewChild(fleetConfigMap("roam-b", "v")).InCluster("edge-1"),
		}
	})
	r.create("roam")
	testenv.Eventually(t, "the member children are created", func() bool { return r.memberCM("roam-a") != nil && r.memberCM("roam-b") != nil })
	if err := r.hub.CoreV1().Secrets("fleet-system").Delete(t.Context(), "edge-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "edge-1 disengaged", func() bool { _, err := r.mgr.Clusters().Get("edge-1"); return err != nil })
	r.declare("roam", func(*v1alpha1.StaticSite) []any {
		return []any{declarative.NewChild(fleetConfigMap("roam-b", "v")).InCluster("edge-1")}
	})
	r.waitCondition("roam", declarative.ReadyCondition, declarative.WaitingReason, "ConfigMap roam-b in cluster edge-1 waits for cluster edge-1 (not engaged)")
	r.declare("roam", func(*v1alpha1.StaticSite) []any { return nil })
	r.waitCondition("roam", declarative.ReadyCondition, declarative.WaitingReason, "ConfigMap roam-a in cluster edge-1 is deleted once cluster edge-1 (not engaged) is ready")
	if err := r.mgr.Client().Delete(t.Context(), &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "roam"}}); err != nil {
		t.Fatal(err)
	}
	// No provider can say that edge-1 is gone for good: the condition says
	// how to stop waiting.
	r.waitCondition("roam", declarative.ReadyCondition, declarative.WaitingReason, "deletion waits for cluster edge-1 (not engaged); if it is gone for good, remove finalizer converge.dev/")
	if msg := r.condition("roam", declarative.ReadyCondition).Message; !strings.Contains(msg, "from this StaticSite by hand") {
		t.Errorf("the deletion's condition does not say what to do if edge-1 is gone for good: %s", msg)
	}
	if r.memberCM("roam-a") == nil || r.memberCM("roam-b") == nil {
		t.Fatal("a member child was deleted while its cluster was not engaged")
	}
	// A parent made meanwhile has nothing in edge-1 whose event would
	// reconcile it: edge-1's engagement does.
	r.declare("late", func(*v1alpha1.StaticSite) []any {
		return []any{declarative.NewChild(fleetConfigMap("late-a", "v")).InCluster("edge-1")}
	})
	r.create("late")
	r.waitCondition("late", declarative.ReadyCondition, declarative.WaitingReason, "ConfigMap late-a in cluster edge-1 waits for cluster edge-1 (not engaged)")
	r.engage()
	testenv.Eventually(t, "the parent's deletion goes on once edge-1 is engaged again", func() bool {
		return r.parent("roam") == nil && r.memberCM("roam-a") == nil && r.memberCM("roam-b") == nil
	})
	testenv.Eventually(t, "the parent that waited for edge-1 applies its child there", func() bool { return r.memberCM("late-a") != nil })
	r.deleteParent("late")
}
