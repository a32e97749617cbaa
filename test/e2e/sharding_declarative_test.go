package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/examples/staticsite/site"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// siteMember is one member of a ring of StaticSite controllers sharded by
// namespace.
type siteMember struct {
	mgr *framework.Manager
	run *runningManager
}

// startSiteMember starts member id of ring, whose Leases are in leases, with
// r as the StaticSite reconciler; its cache holds every namespace.
func startSiteMember(ctx context.Context, ring, leases, id string, r declarative.Reconciler[*v1alpha1.StaticSite], opts framework.Options) *siteMember {
	GinkgoHelper()
	return startSiteMemberWith(ctx, cfg, ring, leases, id, r, opts)
}

// startSiteMemberWith is startSiteMember reaching the API server with c.
func startSiteMemberWith(ctx context.Context, c *rest.Config, ring, leases, id string, r declarative.Reconciler[*v1alpha1.StaticSite], opts framework.Options) *siteMember {
	GinkgoHelper()
	if opts.Logger.GetSink() == nil {
		opts.Logger = GinkgoLogr.WithValues("member", id)
	}
	opts.Sharding = sharding.Options{
		Ring:    ring,
		Buckets: sharding.Buckets{By: sharding.ByNamespace},
		Lease:   lease.Options{Namespace: leases, Identity: id, Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
	}
	mgr, err := framework.NewManager(c, opts)
	Expect(err).NotTo(HaveOccurred(), "NewManager")
	Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
	d, err := declarative.New(mgr, r, declarative.Options{ChildKinds: site.Children()})
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{Sharded: true}).Complete(d)).To(Succeed())
	return &siteMember{mgr: mgr, run: startManager(ctx, mgr)}
}

func (m *siteMember) serving() []int {
	st, _ := m.mgr.RingStatus()
	return st.Serving
}

// cachedConfigMaps returns the namespaces among nss of the ConfigMaps m's
// cache holds, one entry per ConfigMap.
func (m *siteMember) cachedConfigMaps(ctx context.Context, nss []string) []string {
	var list corev1.ConfigMapList
	if err := m.mgr.Cache().List(ctx, &list); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, cm := range list.Items {
		if slices.Contains(nss, cm.Namespace) {
			out = append(out, cm.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

// ringLabel marks the StaticSites of one spec's ring: each member's cache
// holds those only, not the sites other specs left behind.
const ringLabel = "e2e.converge.dev/ring"

// siteNamespaces makes, for each member of ms, n namespaces in buckets it
// serves, each with a StaticSite "site" labelled for ring whose page is the
// namespace's name; which buckets a member gets is known only once it
// serves them. It returns the namespaces by member, and all of them sorted.
func siteNamespaces(ctx context.Context, ring string, n int, ms ...*siteMember) ([][]string, []string) {
	GinkgoHelper()
	buckets := sharding.Buckets{By: sharding.ByNamespace, Count: 32}
	byMember := make([][]string, len(ms))
	var all []string
	for i := 0; slices.ContainsFunc(byMember, func(nss []string) bool { return len(nss) < n }); i++ {
		name := fmt.Sprintf("s%d-%s", i, ring)
		m := slices.IndexFunc(ms, func(m *siteMember) bool { return slices.Contains(m.serving(), buckets.Of(name)) })
		if m < 0 || len(byMember[m]) == n {
			continue
		}
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		})
		createSiteWithLabels(ctx, name, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": name}}, map[string]string{ringLabel: ring})
		byMember[m] = append(byMember[m], name)
		all = append(all, name)
	}
	slices.Sort(all)
	return byMember, all
}

// createSiteWithLabels creates the StaticSite ns/name with spec and labels.
func createSiteWithLabels(ctx context.Context, ns, name string, spec v1alpha1.StaticSiteSpec, labels map[string]string) {
	GinkgoHelper()
	site := createSite(ctx, ns, name, spec)
	patch := map[string]any{"metadata": map[string]any{"labels": labels}}
	b, err := json.Marshal(patch)
	Expect(err).NotTo(HaveOccurred())
	_, err = dyn.Resource(siteGVR).Namespace(ns).Patch(ctx, site.Name, types.MergePatchType, b, metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// ringSites is the cache selection of a member: the StaticSites of ring.
func ringSites(ring string) framework.Options {
	return framework.Options{Cache: informers.Options{ByKind: map[schema.GroupKind]informers.Selection{
		{Group: v1alpha1.GroupVersion.Group, Kind: "StaticSite"}: {Labels: labels.SelectorFromSet(labels.Set{ringLabel: ring})},
	}}}
}

var _ = Describe("a declarative controller sharded by namespace", func() {
	var ring, leases string
	BeforeEach(func(ctx SpecContext) {
		ring = "sites-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		leases = newNamespace(ctx)
	})

	It("caches each member's children only, reconciles each site on the member that holds its namespace, and moves children with their parents", func(ctx SpecContext) {
		a := startSiteMember(ctx, ring, leases, "a", newSites(), ringSites(ring))
		b := startSiteMember(ctx, ring, leases, "b", newSites(), ringSites(ring))
		Eventually(ctx, func() bool { return len(a.serving()) == 16 && len(b.serving()) == 16 }).WithTimeout(30*time.Second).Should(BeTrue(), "a and b serve 16 buckets each")
		byMember, nss := siteNamespaces(ctx, ring, 3, a, b)
		nsA, nsB := byMember[0], byMember[1]
		slices.Sort(nsA)
		slices.Sort(nsB)
		for _, ns := range nss {
			Eventually(ctx, siteReady(ctx, ns, "site")).WithTimeout(time.Minute).Should(Succeed())
		}
		Eventually(ctx, func() []string { return a.cachedConfigMaps(ctx, nss) }).Should(Equal(nsA), "a caches the ConfigMaps of its namespaces only")
		Eventually(ctx, func() []string { return b.cachedConfigMaps(ctx, nss) }).Should(Equal(nsB), "b caches the ConfigMaps of its namespaces only")

		By("drifting every site's ConfigMap: each member reverts its own")
		for _, ns := range nss {
			patchAs(ctx, corev1.SchemeGroupVersion.WithResource("configmaps"), ns, "site", types.MergePatchType, `{"data":{"index.html":"by hand"}}`)
		}
		for _, ns := range nss {
			Eventually(ctx, configMapData(ctx, ns, "site")).WithTimeout(30*time.Second).Should(HaveKeyWithValue("index.html", ns), "drift in %s was not reverted", ns)
		}

		By("stopping a: b takes a's sites and their children over")
		a.run.stop(ctx)
		Expect(a.run.err).NotTo(HaveOccurred())
		Eventually(ctx, b.serving).WithTimeout(30*time.Second).Should(HaveLen(32), "b serves every bucket")
		Eventually(ctx, func() []string { return b.cachedConfigMaps(ctx, nss) }).Should(Equal(nss), "b caches every site's ConfigMap")
		for _, ns := range nsA {
			patchSite(ctx, ns, "site", `{"spec":{"pages":{"index.html":"v2"}}}`)
		}
		for _, ns := range nsA {
			Eventually(ctx, configMapData(ctx, ns, "site")).WithTimeout(30*time.Second).Should(HaveKeyWithValue("index.html", "v2"), "b did not apply the change in %s", ns)
		}
	}, SpecTimeout(3*time.Minute))

	It("rejects a child outside its parent's namespace, naming both namespaces, and creates nothing", func(ctx SpecContext) {
		logs := &logCapture{}
		var elsewhere string
		r := declarative.Func[*v1alpha1.StaticSite](func(context.Context, *v1alpha1.StaticSite) (declarative.State, error) {
			return declarative.State{Children: []any{&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: elsewhere},
			}}}, nil
		})
		opts := ringSites(ring)
		opts.Logger = logs.logger()
		a := startSiteMember(ctx, ring, leases, "a", r, opts)
		Eventually(ctx, a.serving).WithTimeout(30*time.Second).Should(HaveLen(32), "a serves every bucket")
		elsewhere = leases // a namespace a's bucket holds too, today
		_, nss := siteNamespaces(ctx, ring, 1, a)
		Eventually(ctx, loggedErrors(logs, fmt.Sprintf("child ConfigMap %s/elsewhere", elsewhere), fmt.Sprintf("declare it in %q", nss[0]), "sharded by namespace")).
			WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		_, err := configMap(ctx, elsewhere, "elsewhere")()
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a child in another namespace was created: %v", err)
	}, SpecTimeout(2*time.Minute))
})
