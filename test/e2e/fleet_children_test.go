package e2e_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// fleetChildrenSpecs are the fleet specs of a declarative parent in the
// suite's control plane whose children live in the members; members
// returns a, b and c once BeforeAll started them.
func fleetChildrenSpecs(members func() []*fleetMember) {
	It("creates a hub parent's children in every member, reverts their drift, catches up with a member that was down, and deletes them with the parent but the retained one", func(ctx SpecContext) {
		ms := members()
		a, b, c := ms[0], ms[1], ms[2]
		ns := newNamespace(ctx)
		for _, m := range ms {
			m.mirror(ctx, ns)
			m.engage(ctx, ns)
		}
		mgr := startFleetSites(ctx, ns, ms)
		pages := &fleetPages{ctx: ctx, ns: ns, mgr: mgr}
		child, k := pages.child, pages.k
		site := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"}, Spec: v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "v1"}}}
		Expect(mgr.Client().Create(ctx, site)).To(Succeed())
		for _, m := range ms {
			Eventually(k(m)).WithTimeout(30*time.Second).Should(Equal("v1"), "the child in %s is created", m.name)
			cm := child(m)()
			Expect(cm.OwnerReferences).To(BeEmpty(), "a child in another cluster has no owner reference")
			Expect(cm.Labels).To(HaveKeyWithValue(declarative.ParentUIDLabel, string(site.UID)))
		}
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "site-page", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the children were created in the hub too: %v", err)

		// Drift in a member is reverted: an edit in b, a deletion in a.
		setK(ctx, b.kube, ns, "site-page", "drifted")
		Expect(a.kube.CoreV1().ConfigMaps(ns).Delete(ctx, "site-page", metav1.DeleteOptions{})).To(Succeed())
		Eventually(k(b)).Should(Equal("v1"), "the edit in b is reverted")
		Eventually(k(a)).Should(Equal("v1"), "the child deleted in a is created again")

		// The parent changes while b's API server is down: a and c follow
		// at once, b once it is back.
		Expect(b.plane.StopAPIServer(ctx)).To(Succeed())
		DeferCleanup(b.plane.StartAPIServer, NodeTimeout(time.Minute)) // for the specs after this one, should it fail
		Eventually(clusterState(mgr, "b")).WithTimeout(30*time.Second).Should(Equal(cluster.StateUnhealthy), "the manager sees b down")
		pages.setPage("v2")
		Eventually(k(a)).Should(Equal("v2"))
		Eventually(k(c)).Should(Equal("v2"))
		Eventually(pages.readyMessage).Should(ContainSubstring("waits for cluster b"), "the parent's Ready condition names the member it waits for")
		Expect(b.plane.StartAPIServer(ctx)).To(Succeed())
		Eventually(k(b)).WithTimeout(30*time.Second).Should(Equal("v2"), "b catches up with the change made while it was down")

		// Deleted with the parent, but for the retained child in c, which
		// is released.
		retained := child(c)()
		Expect(mgr.Client().Delete(ctx, site)).To(Succeed())
		Eventually(child(a)).Should(BeNil(), "the child in a is deleted with its parent")
		Eventually(child(b)).Should(BeNil(), "the child in b is deleted with its parent")
		Eventually(func() error {
			return mgr.APIReader().Get(ctx, types.NamespacedName{Namespace: ns, Name: "site"}, &v1alpha1.StaticSite{})
		}).Should(Satisfy(apierrors.IsNotFound), "the parent is gone")
		kept := child(c)()
		Expect(kept).NotTo(BeNil(), "the retained child in c was deleted")
		Expect(kept.UID).To(Equal(retained.UID), "the retained child was replaced")
		Expect(kept.Labels).NotTo(HaveKey(declarative.ParentUIDLabel), "the retained child still names its parent")
		Expect(kept.Data["k"]).To(Equal("v2"))
	})
}

// fleetPages reads the children a startFleetSites manager declares for
// site ns/site, and changes it.
type fleetPages struct {
	ctx context.Context
	ns  string
	mgr *framework.Manager
}

// child returns a function reading ConfigMap ns/site-page in m; nil when
// there is none.
func (p *fleetPages) child(m *fleetMember) func() *corev1.ConfigMap {
	return func() *corev1.ConfigMap {
		cm, err := m.kube.CoreV1().ConfigMaps(p.ns).Get(p.ctx, "site-page", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		Expect(err).NotTo(HaveOccurred())
		return cm
	}
}

// k returns a function reading the k of ConfigMap ns/site-page in m,
// "<none>" when there is none.
func (p *fleetPages) k(m *fleetMember) func() string {
	return func() string {
		if cm := p.child(m)(); cm != nil {
			return cm.Data["k"]
		}
		return "<none>"
	}
}

// setPage sets the site's index.html, which its children hold as k.
func (p *fleetPages) setPage(v string) {
	GinkgoHelper()
	patch := `{"spec":{"pages":{"index.html":"` + v + `"}}}`
	Expect(p.mgr.Client().Patch(p.ctx, &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "site"}}, types.MergePatchType, []byte(patch))).To(Succeed())
}

// readyMessage returns the message of the site's Ready condition, or why
// there is none.
func (p *fleetPages) readyMessage() string {
	got := &v1alpha1.StaticSite{}
	if err := p.mgr.APIReader().Get(p.ctx, types.NamespacedName{Namespace: p.ns, Name: "site"}, got); err != nil {
		return err.Error()
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, declarative.ReadyCondition); cond != nil {
		return cond.Message
	}
	return "no Ready condition"
}

// startFleetSites starts a manager of namespace ns whose Secret provider
// reads ns, with a declarative StaticSite controller that declares, for
// each site, a ConfigMap <site>-page holding k=<its index.html> in each of
// members (retained in the last one), and returns it once every member is
// engaged.
func startFleetSites(ctx context.Context, ns string, members []*fleetMember) *framework.Manager {
	GinkgoHelper()
	p, err := secrets.New(secrets.Options{Namespace: ns})
	Expect(err).NotTo(HaveOccurred())
	mgr := newManager(ns, framework.Options{Clusters: cluster.Options{Providers: []cluster.Provider{p}, Health: fleetHealth}})
	Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
	desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
		var children []any
		for i, m := range members {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-page"}, Data: map[string]string{"k": site.Spec.Pages["index.html"]}}
			ch := declarative.NewChild(cm).InCluster(m.name)
			if i == len(members)-1 {
				ch = ch.Retain()
			}
			children = append(children, ch)
		}
		return declarative.State{Children: children, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation, Conditions: site.Status.Conditions}}, nil
	}
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](desired), declarative.Options{ChildKinds: []object.Object{&corev1.ConfigMap{}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "site", framework.ControllerOptions{}).Complete(d)).To(Succeed())
	startManager(ctx, mgr)
	for _, m := range members {
		Eventually(clusterState(mgr, m.name)).WithTimeout(30*time.Second).Should(Equal(cluster.StateReady), "member %s engaged", m.name)
	}
	return mgr
}
