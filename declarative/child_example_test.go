package declarative_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
)

// A site whose Deployment starts only once a migration Job is Complete,
// and whose Service comes once the Deployment serves (has a ready
// replica); an extra ConfigMap exists only while spec.minAvailable is set.
// The status gets a Ready condition saying what the site waits for, in the
// words of the built-in readiness or of ReadyWhen: "Deployment docs waits
// for Job docs-migrate (Complete) since ...", then "Service docs waits for
// Deployment docs (serving) since ...". A Deployment whose pods cannot be
// created reads as failed: "Deployment docs failed (pods cannot be
// created)", as one past its progress deadline does without a FailedWhen.
func ExampleNewChild() {
	desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
		config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: site.Name}, Data: site.Spec.Pages}
		migrate := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-migrate"} /* spec */}
		web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: site.Name} /* spec */}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: site.Name} /* spec */}
		return declarative.State{
			Children: []any{
				config, // ready once it exists
				declarative.NewChild(migrate).After(config), // ready when Complete
				declarative.NewChild(web).After(migrate).
					ReadyWhen("serving", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas > 0 }).
					FailedWhen("pods cannot be created", func(d *appsv1.Deployment) bool {
						return slices.ContainsFunc(d.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
							return c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue // a quota exceeded, say
						})
					}),
				declarative.NewChild(svc).After(web),
				declarative.NewChild(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-extra"}}).
					IncludeWhen(site.Spec.MinAvailable != nil),
			},
			Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}, // converge adds Ready
		}, nil
	}
	state, _ := desired(context.Background(), &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Name: "docs"}}) //nolint:forbidigo // an example
	fmt.Println(len(state.Children), "children")
	// Output: 5 children
}

// A site published to every cluster listed in its labels: the same
// ConfigMap in each, by the name providers engaged it under (see package
// cluster). converge applies each one through that cluster's client, links
// it to the site by labels and the site's ledger (an owner reference would
// have the cluster's garbage collector delete it), reverts drift there,
// prunes the copy of a cluster no longer listed and deletes them all with
// the site. A cluster not engaged, or unhealthy, holds only its own copy:
// the Ready condition says "ConfigMap docs in cluster edge-2 waits for
// cluster edge-2 (not engaged)".
func ExampleChild_InCluster() {
	desired := func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
		var children []any
		for _, name := range strings.Split(site.Labels["example.com/clusters"], ",") {
			page := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: site.Name}, Data: site.Spec.Pages}
			children = append(children, declarative.NewChild(page).InCluster(name))
		}
		return declarative.State{Children: children, Status: v1alpha1.StaticSiteStatus{ObservedGeneration: site.Generation}}, nil
	}
	site := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Name: "docs", Labels: map[string]string{"example.com/clusters": "edge-1,edge-2"}}}
	state, _ := desired(context.Background(), site) //nolint:forbidigo // an example
	fmt.Println(len(state.Children), "children")
	// Output: 2 children
}
