package main

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework/explore"
)

// The StaticSite controller keeps its properties under the explorer's
// faults: each site's ConfigMap serves its latest pages, its status
// observes its latest generation, and no child outlives its site.
func TestExplore(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	docs := &v1alpha1.StaticSite{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "docs"},
		Spec: v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "hello"}}}
	key := types.NamespacedName{Namespace: "web", Name: "docs"}
	edit := explore.Update(key, func(s *v1alpha1.StaticSite) {
		s.Spec.Pages = map[string]string{"index.html": "hello again"}
		s.Spec.MinAvailable = ptr.To[int32](1)
	})
	explore.Run(t, explore.Options{
		Setup:     setup, // what main calls
		Scheme:    scheme,
		Steps:     []explore.Step{explore.Create(docs), edit, explore.Delete(docs)},
		Converged: []explore.Invariant{{Name: "each site serves its pages and observes its generation", Check: serves}, {Name: "every child is controlled by a site", Check: noOrphans}},
		Schedules: 30,
	})
}

func serves(ctx context.Context, s *explore.Snapshot) error {
	sites, err := explore.List[*v1alpha1.StaticSite](ctx, s)
	if err != nil {
		return err
	}
	for _, site := range sites {
		cm, ok, err := explore.Get[*corev1.ConfigMap](ctx, s, types.NamespacedName{Namespace: site.Namespace, Name: site.Name})
		if err != nil {
			return err
		}
		if !ok || !maps.Equal(cm.Data, site.Spec.Pages) {
			return fmt.Errorf("site %s/%s: its ConfigMap does not serve its pages (%v)", site.Namespace, site.Name, ok)
		}
		if site.Status.ObservedGeneration != site.Generation {
			return fmt.Errorf("site %s/%s: status observed generation %d, it is at %d", site.Namespace, site.Name, site.Status.ObservedGeneration, site.Generation)
		}
	}
	return nil
}

func noOrphans(ctx context.Context, s *explore.Snapshot) error {
	cms, err := explore.List[*corev1.ConfigMap](ctx, s)
	if err != nil {
		return err
	}
	for _, cm := range cms {
		// A child whose site is gone is the garbage collector's: the fake
		// API server collects children when their owner is deleted, a
		// cluster's collector also those applied after (a cache that had
		// not yet seen the deletion).
		if owner := metav1.GetControllerOf(cm); owner == nil || owner.Kind != "StaticSite" {
			return fmt.Errorf("ConfigMap %s/%s has no StaticSite controller: nothing will delete it", cm.Namespace, cm.Name)
		}
	}
	return nil
}
