package e2e_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/object"
)

// startDeclarative starts a manager for namespace ns running r as the
// StaticSite controller, with children of the kinds of children.
func startDeclarative(ctx context.Context, ns string, r declarative.Reconciler[*v1alpha1.StaticSite], children []object.Object, opts framework.Options) (*framework.Manager, *runningManager) {
	GinkgoHelper()
	mgr := newManager(ns, opts)
	Expect(v1alpha1.AddToScheme(mgr.Scheme())).To(Succeed())
	d, err := declarative.New(mgr, r, declarative.Options{ChildKinds: children})
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{}).Complete(d)).To(Succeed())
	return mgr, startManager(ctx, mgr)
}

// pageMaps declares, for each page of a StaticSite, a ConfigMap named after
// the page whose data "content" is the page; a page named "adopt:NAME"
// declares ConfigMap NAME wrapped with declarative.Adopt. It counts the
// reconciles of each site.
type pageMaps struct{ desired *recorder }

func newPageMaps() pageMaps { return pageMaps{desired: newRecorder()} }

func (p pageMaps) Desired(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	p.desired.record(key(site.Namespace, site.Name))
	var children []any
	for page, content := range site.Spec.Pages {
		name, adopt := strings.CutPrefix(page, "adopt:")
		cm := &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Data:       map[string]string{"content": content},
		}
		if adopt {
			children = append(children, declarative.Adopt(cm))
			continue
		}
		children = append(children, cm)
	}
	return declarative.State{Children: children, Status: v1alpha1.StaticSiteStatus{
		ObservedGeneration: site.Generation,
		Conditions:         declarative.NewConditions(site.Status.Conditions, site.Generation).True("Ready", "Declared", "").List(),
	}}, nil
}

// siteConditions returns a function reporting the status conditions of
// StaticSite ns/name.
func siteConditions(ctx context.Context, ns, name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		s, err := getSite(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		return s.Status.Conditions, nil
	}
}

// clusterRoleOf declares one cluster-scoped child of a StaticSite, which
// owner references cannot tie to it: the ClusterRole named by
// siteClusterRole. before, when set, runs first in every Desired.
type clusterRoleOf struct {
	desired *recorder
	before  func(ctx context.Context, site *v1alpha1.StaticSite)
}

func (c clusterRoleOf) Desired(ctx context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
	c.desired.record(key(site.Namespace, site.Name))
	if c.before != nil {
		c.before(ctx, site)
	}
	return declarative.State{Children: []any{&rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: siteClusterRole(site.Namespace, site.Name)},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}}}, nil
}

// siteClusterRole names the ClusterRole of StaticSite ns/name: spec
// namespaces are unique, so the names of specs never collide.
func siteClusterRole(ns, name string) string { return ns + "-" + name }

// clusterRoleGone returns a function reporting whether ClusterRole name is absent.
func clusterRoleGone(ctx context.Context, name string) func() (bool, error) {
	return func() (bool, error) {
		_, err := kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

// siteGone returns a function reporting whether StaticSite ns/name is absent.
func siteGone(ctx context.Context, ns, name string) func() (bool, error) {
	return func() (bool, error) {
		_, err := getSite(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

// conflictEvents returns a function listing the Warning Events of reason
// declarative.ChildConflictReason regarding StaticSite site.
func conflictEvents(ctx context.Context, site *v1alpha1.StaticSite) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		list, err := kube.EventsV1().Events(site.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.UID == site.UID && e.Reason == declarative.ChildConflictReason && e.Type == corev1.EventTypeWarning {
				out = append(out, e)
			}
		}
		return out, nil
	}
}

// configMap returns a function reading ConfigMap ns/name from the API server.
func configMap(ctx context.Context, ns, name string) func() (*corev1.ConfigMap, error) {
	return func() (*corev1.ConfigMap, error) {
		return kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}
}

// deploymentArgs returns a function reporting the args of the first
// container of Deployment ns/name.
func deploymentArgs(ctx context.Context, ns, name string) func() ([]string, error) {
	return func() ([]string, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return d.Spec.Template.Spec.Containers[0].Args, nil
	}
}

// editDeployment changes Deployment ns/name with edit and updates it as
// kubectl edit does, retrying on conflicts with the controller's writes.
func editDeployment(ctx context.Context, ns, name string, edit func(*appsv1.Deployment)) {
	GinkgoHelper()
	deploys := kube.AppsV1().Deployments(ns)
	Eventually(ctx, func() error {
		d, err := deploys.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(d)
		_, err = deploys.Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	}).Should(Succeed())
}

// loggedErrors returns a function listing the errors logged (their "error"
// field) that contain every one of parts.
func loggedErrors(logs *logCapture, parts ...string) func() []string {
	return func() []string {
		var out []string
		for _, line := range logs.all() {
			msg := fmt.Sprint(line["error"])
			if _, ok := line["error"]; !ok {
				continue
			}
			all := true
			for _, p := range parts {
				all = all && strings.Contains(msg, p)
			}
			if all {
				out = append(out, msg)
			}
		}
		return out
	}
}

// anySpec is a valid StaticSite spec, for reconcilers that do not read it.
var anySpec = v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "unused"}}
