package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// rolesOf declares, for each page "role:NAME" of a StaticSite, a ClusterRole
// (which no owner reference can tie to the namespaced site) named
// siteClusterRole(namespace, NAME); a page "adopt-role:NAME" declares it
// wrapped with declarative.Adopt. Other pages declare nothing.
func rolesOf(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	var children []any
	for page := range site.Spec.Pages {
		kind, name, ok := strings.Cut(page, ":")
		if !ok || (kind != "role" && kind != "adopt-role") {
			continue
		}
		var role any = &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: siteClusterRole(site.Namespace, name)},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
		}
		if kind == "adopt-role" {
			role = declarative.Adopt(role)
		}
		children = append(children, role)
	}
	return declarative.State{Children: children}, nil
}

var clusterRoles = []object.Object{&rbacv1.ClusterRole{}}

// recordedChildren returns a function reporting the UIDs (or claims) StaticSite
// ns/name records in declarative.LedgerAnnotation.
func recordedChildren(ctx context.Context, ns, name string) func() ([]string, error) {
	return func() ([]string, error) {
		s, err := getSite(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		fields := strings.Fields(s.GetAnnotations()[declarative.LedgerAnnotation])
		if len(fields) == 0 {
			return nil, nil
		}
		if fields[0] != string(s.UID) {
			return nil, fmt.Errorf("annotation %s starts with %s, not the parent's uid %s", declarative.LedgerAnnotation, fields[0], s.UID)
		}
		var uids []string
		for _, f := range fields[1:] {
			uid, _, _ := strings.Cut(f, "=")
			uids = append(uids, uid)
		}
		return uids, nil
	}
}

// clusterRole returns a function reading ClusterRole name from the API server.
func clusterRole(ctx context.Context, name string) func() (*rbacv1.ClusterRole, error) {
	return func() (*rbacv1.ClusterRole, error) {
		return kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	}
}

// deleteClusterRolesLater deletes the ClusterRoles names when the spec ends:
// cluster-scoped, they outlive the spec's namespace.
func deleteClusterRolesLater(names ...string) {
	DeferCleanup(func(ctx SpecContext) {
		for _, n := range names {
			_ = kube.RbacV1().ClusterRoles().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
}

var _ = Describe("declarative children no owner reference can reach", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("never takes, prunes or finalizes a hand-made ClusterRole carrying the parent's labels, and reports the conflict", func(ctx SpecContext) {
		forgedName, mineName := siteClusterRole(ns, "forged"), siteClusterRole(ns, "mine")
		deleteClusterRolesLater(forgedName, mineName)
		startDeclarative(ctx, ns, declarative.Func[*v1alpha1.StaticSite](rolesOf), clusterRoles, framework.Options{})
		site := createSite(ctx, ns, "site", anySpec)

		By("copying the site's labels and annotation onto a hand-made ClusterRole")
		forged, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{
				Name:        forgedName,
				Labels:      map[string]string{declarative.ParentUIDLabel: string(site.UID), declarative.ManagerLabel: siteFieldManager},
				Annotations: map[string]string{declarative.ParentAnnotation: ns + "/" + site.Name},
			},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		untouched := And(HaveField("ResourceVersion", forged.ResourceVersion), HaveField("Rules", Equal(forged.Rules)))

		By("declaring a child of its name: a conflict, the object untouched")
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"role:forged":"x"}}}`)
		Eventually(ctx, conflictEvents(ctx, site)).WithTimeout(30 * time.Second).Should(ContainElement(HaveField("Note", And(
			ContainSubstring(fmt.Sprintf("ClusterRole %s already exists and is not managed by StaticSite %s/site", forgedName, ns)),
			ContainSubstring("converge did not create it"),
		))))
		Consistently(ctx, clusterRole(ctx, forgedName)).WithTimeout(2*time.Second).Should(untouched, "a hand-made ClusterRole with forged labels was overwritten")

		By("no longer declaring it, and declaring another: it is not pruned")
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"role:forged":null,"role:mine":"x"}}}`)
		Eventually(ctx, clusterRole(ctx, mineName)).WithTimeout(30 * time.Second).Should(HaveField("Labels", HaveKeyWithValue(declarative.ParentUIDLabel, string(site.UID))))
		Consistently(ctx, clusterRole(ctx, forgedName)).WithTimeout(2*time.Second).Should(untouched, "a hand-made ClusterRole with forged labels was pruned")

		By("deleting the site: its own ClusterRole goes, the hand-made one stays")
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, siteGone(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(BeTrue())
		Expect(clusterRoleGone(ctx, mineName)()).To(BeTrue(), "the site's own ClusterRole outlived it")
		Expect(clusterRole(ctx, forgedName)()).To(untouched, "a hand-made ClusterRole with forged labels was deleted on finalize")
	}, SpecTimeout(2*time.Minute))

	It("never adopts another parent's label-linked child, and does not advise Adopt", func(ctx SpecContext) {
		name := siteClusterRole(ns, "shared")
		deleteClusterRolesLater(name)
		startDeclarative(ctx, ns, declarative.Func[*v1alpha1.StaticSite](rolesOf), clusterRoles, framework.Options{})
		first := createSite(ctx, ns, "first", v1alpha1.StaticSiteSpec{Pages: map[string]string{"role:shared": "x"}})
		Eventually(ctx, clusterRole(ctx, name)).WithTimeout(30 * time.Second).Should(HaveField("Labels", HaveKeyWithValue(declarative.ParentUIDLabel, string(first.UID))))
		before, err := clusterRole(ctx, name)()
		Expect(err).NotTo(HaveOccurred())

		second := createSite(ctx, ns, "second", v1alpha1.StaticSiteSpec{Pages: map[string]string{"adopt-role:shared": "x"}})
		Eventually(ctx, conflictEvents(ctx, second)).WithTimeout(30 * time.Second).Should(ContainElement(HaveField("Note", And(
			ContainSubstring(fmt.Sprintf("ClusterRole %s already exists and is not managed by StaticSite %s/second", name, ns)),
			ContainSubstring(fmt.Sprintf("links it to another parent (uid %s)", first.UID)),
			Not(ContainSubstring("declare it with declarative.Adopt")),
		))))
		Consistently(ctx, clusterRole(ctx, name)).WithTimeout(2*time.Second).Should(And(
			HaveField("ResourceVersion", before.ResourceVersion),
			HaveField("Labels", HaveKeyWithValue(declarative.ParentUIDLabel, string(first.UID))),
		), "Adopt took another parent's child")
	}, SpecTimeout(2*time.Minute))

	It("proves nothing with a ledger copied from another parent: the copy's child of the same name is a conflict, the original's child untouched", func(ctx SpecContext) {
		name := siteClusterRole(ns, "shared")
		deleteClusterRolesLater(name)
		startDeclarative(ctx, ns, declarative.Func[*v1alpha1.StaticSite](rolesOf), clusterRoles, framework.Options{})
		original := createSite(ctx, ns, "original", v1alpha1.StaticSiteSpec{Pages: map[string]string{"role:shared": "x"}})
		Eventually(ctx, clusterRole(ctx, name)).WithTimeout(30 * time.Second).Should(HaveField("Labels", HaveKeyWithValue(declarative.ParentUIDLabel, string(original.UID))))
		before, err := clusterRole(ctx, name)()
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, recordedChildren(ctx, ns, original.Name)).Should(ConsistOf(string(before.UID)))
		got, err := getSite(ctx, ns, original.Name)
		Expect(err).NotTo(HaveOccurred())

		By("creating a copy of the original's YAML under another name, its ledger annotation included")
		copied := createSiteWithAnnotations(ctx, ns, "copy", got.Spec, got.Annotations)
		Eventually(ctx, conflictEvents(ctx, copied)).WithTimeout(30 * time.Second).Should(ContainElement(HaveField("Note",
			ContainSubstring(fmt.Sprintf("links it to another parent (uid %s)", original.UID)))))
		Consistently(ctx, clusterRole(ctx, name)).WithTimeout(2*time.Second).Should(And(
			HaveField("ResourceVersion", before.ResourceVersion),
			HaveField("Labels", HaveKeyWithValue(declarative.ParentUIDLabel, string(original.UID))),
		), "the copy took the original's child")

		By("deleting the copy: the original's child stays")
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, copied.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, siteGone(ctx, ns, copied.Name)).WithTimeout(30 * time.Second).Should(BeTrue())
		Expect(clusterRole(ctx, name)()).To(HaveField("UID", before.UID), "deleting the copy deleted the original's child")
	}, SpecTimeout(2*time.Minute))

	It("adopts, with Adopt, a child whose labels link it to a parent that no longer exists", func(ctx SpecContext) {
		name := siteClusterRole(ns, "orphan")
		deleteClusterRolesLater(name)
		_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      map[string]string{declarative.ParentUIDLabel: "0a0a0a0a-dead-parent", declarative.ManagerLabel: siteFieldManager},
				Annotations: map[string]string{declarative.ParentAnnotation: ns + "/gone"},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		startDeclarative(ctx, ns, declarative.Func[*v1alpha1.StaticSite](rolesOf), clusterRoles, framework.Options{})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"adopt-role:orphan": "x"}})
		Eventually(ctx, clusterRole(ctx, name)).WithTimeout(30*time.Second).Should(And(
			HaveField("Labels", HaveKeyWithValue(declarative.ParentUIDLabel, string(site.UID))),
			HaveField("Rules", HaveLen(1)),
		), "the orphan of a deleted parent was not adopted")
	}, SpecTimeout(2*time.Minute))

	It("still prunes and finalizes what it created after a manager restart", func(ctx SpecContext) {
		kept, gone := siteClusterRole(ns, "kept"), siteClusterRole(ns, "gone")
		deleteClusterRolesLater(kept, gone)
		_, first := startDeclarative(ctx, ns, declarative.Func[*v1alpha1.StaticSite](rolesOf), clusterRoles, framework.Options{})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"role:kept": "x", "role:gone": "x"}})
		var uids []string
		for _, n := range []string{kept, gone} {
			Eventually(ctx, clusterRole(ctx, n)).WithTimeout(30 * time.Second).Should(HaveField("Labels", HaveKeyWithValue(declarative.ParentUIDLabel, string(site.UID))))
			cr, err := clusterRole(ctx, n)()
			Expect(err).NotTo(HaveOccurred())
			uids = append(uids, string(cr.UID))
		}
		Eventually(ctx, recordedChildren(ctx, ns, site.Name)).Should(ConsistOf(uids), "the parent does not record the children converge created")

		By("restarting the manager")
		first.stop(ctx)
		startDeclarative(ctx, ns, declarative.Func[*v1alpha1.StaticSite](rolesOf), clusterRoles, framework.Options{})

		By("no longer declaring one: the new manager prunes it")
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"role:gone":null}}}`)
		Eventually(ctx, clusterRoleGone(ctx, gone)).WithTimeout(30*time.Second).Should(BeTrue(), "a child created before the restart was not pruned")
		Eventually(ctx, recordedChildren(ctx, ns, site.Name)).Should(ConsistOf(uids[0]), "a pruned child is still recorded")

		By("deleting the site: the new manager deletes the other")
		Expect(dyn.Resource(siteGVR).Namespace(ns).Delete(ctx, site.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(ctx, siteGone(ctx, ns, site.Name)).WithTimeout(30 * time.Second).Should(BeTrue())
		Expect(clusterRoleGone(ctx, kept)()).To(BeTrue(), "a child created before the restart outlived its parent")
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("declarative conflict reports", func() {
	It("records the conflict Event and condition with the reason and note set in Options.Conflict", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createConfigMap(ctx, ns, "taken", map[string]string{"content": "by hand"})
		mgr := newManager(ns, framework.Options{})
		Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
		d, err := declarative.New(mgr, newPageMaps(), declarative.Options{
			ChildKinds: []object.Object{&corev1.ConfigMap{}},
			Conflict: declarative.ConflictOptions{
				Reason: "ErrResourceExists",
				Note: func(c declarative.Conflict) string {
					return fmt.Sprintf("Resource %q already exists and is not managed by %s", c.Object.GetName(), c.Parent.GetName())
				},
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{}).Complete(d)).To(Succeed())
		startManager(ctx, mgr)
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"taken": "converge"}})
		note := `Resource "taken" already exists and is not managed by site`

		Eventually(ctx, func() ([]eventsv1.Event, error) {
			list, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return list.Items, nil
		}).WithTimeout(30 * time.Second).Should(ContainElement(And(
			HaveField("Regarding.UID", site.UID),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Reason", "ErrResourceExists"),
			HaveField("Note", note),
		)))
		Eventually(ctx, siteConditions(ctx, ns, site.Name)).Should(ContainElement(And(
			HaveField("Type", declarative.ChildConflictCondition),
			HaveField("Reason", "ErrResourceExists"),
			HaveField("Message", note),
		)))
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("declarative children applied at once", func() {
	It("raises a panic of one child's apply on the reconcile, after its siblings were applied, and keeps running", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createConfigMap(ctx, ns, "taken", map[string]string{"content": "by hand"})
		var notes atomic.Int32
		mgr := newManager(ns, framework.Options{})
		Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
		d, err := declarative.New(mgr, newPageMaps(), declarative.Options{
			ChildKinds: []object.Object{&corev1.ConfigMap{}},
			Conflict: declarative.ConflictOptions{Note: func(declarative.Conflict) string {
				notes.Add(1)
				panic("a Note that panics")
			}},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{}).Complete(d)).To(Succeed())
		startManager(ctx, mgr)
		pages := map[string]string{"taken": "converge"}
		for i := range 6 {
			pages[fmt.Sprintf("free-%d", i)] = "converge"
		}
		createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: pages})

		for i := range 6 {
			Eventually(ctx, configMap(ctx, ns, fmt.Sprintf("free-%d", i))).WithTimeout(30*time.Second).
				Should(HaveField("Data", HaveKeyWithValue("content", "converge")), "a sibling of the child whose apply panicked was not applied")
		}
		Eventually(ctx, notes.Load).WithTimeout(30*time.Second).Should(BeNumerically(">=", 2),
			"the reconcile was not retried after the panic: it was not treated as the reconcile's")
		Expect(configMap(ctx, ns, "taken")()).To(HaveField("Data", HaveKeyWithValue("content", "by hand")), "the foreign object was changed")
	}, SpecTimeout(2*time.Minute))
})
