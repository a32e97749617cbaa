package informers_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/informers"
)

// Two readers of Pods share one informer: one LIST and one WATCH. Reads
// return the cached objects themselves; they must not be modified.
func ExampleFor() {
	ctx := context.Background()
	cfg := &rest.Config{Host: "https://my-cluster:6443"} // usually from a kubeconfig

	c, err := informers.New(cfg, informers.Options{})
	if err != nil {
		panic(err)
	}
	go func() { _ = c.Start(ctx) }()

	pods, _ := informers.For[*corev1.Pod](c, informers.Selection{})
	web, _ := informers.For[*corev1.Pod](c, informers.Selection{}) // same informer as pods
	_ = web.AddIndex("spec.nodeName", func(p *corev1.Pod) []string { return []string{p.Spec.NodeName} })

	onNode, err := pods.List(ctx,
		informers.MatchingIndex("spec.nodeName", "node-a"),
		informers.MatchingLabels(labels.SelectorFromSet(labels.Set{"app": "web"})))
	if err != nil {
		fmt.Println(err) // names the kind and cause: forbidden, CRD not installed, unreachable
		return
	}
	for _, p := range onNode {
		fmt.Println(p.Namespace, p.Name, p.Status.Phase)
	}
}

// The cache resyncs Secrets every ten minutes and nothing else; one handler
// of ConfigMaps asks for its own period. Lists select by name from the
// cache; other fields need an informer narrowed on the server.
func ExampleMatchingFields() {
	ctx := context.Background()
	cfg := &rest.Config{Host: "https://my-cluster:6443"}

	c, err := informers.New(cfg, informers.Options{
		ResyncByKind: map[schema.GroupKind]time.Duration{{Kind: "Secret"}: 10 * time.Minute},
	})
	if err != nil {
		panic(err)
	}
	go func() { _ = c.Start(ctx) }()

	cms, _ := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	hourly := time.Hour
	_, _ = cms.AddListener(informers.ListenerFuncs[*corev1.ConfigMap]{
		UpdateFunc: func(oldCM, newCM *corev1.ConfigMap) {
			if oldCM.ResourceVersion == newCM.ResourceVersion {
				fmt.Println("resync of", newCM.Name)
			}
		},
	}, cache.HandlerOptions{ResyncPeriod: &hourly})

	notRoot, err := cms.List(ctx, informers.MatchingFields(fields.OneTermNotEqualSelector("metadata.name", "kube-root-ca.crt")))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(notRoot))

	// status.phase is evaluated by the API server: narrow the informer.
	running, _ := informers.For[*corev1.Pod](c, informers.Selection{Fields: fields.OneTermEqualSelector("status.phase", "Running")})
	pods, _ := running.List(ctx)
	fmt.Println(len(pods))
}

// With RefuseUnwatchedReads, a read of a kind nothing watches fails at
// once instead of starting an informer of the whole kind; Stats shows
// each informer's objects and estimated bytes.
func ExampleOptions_refuseUnwatchedReads() {
	ctx := context.Background()
	cfg := &rest.Config{Host: "https://my-cluster:6443"} // usually from a kubeconfig

	c, err := informers.New(cfg, informers.Options{RefuseUnwatchedReads: true})
	if err != nil {
		panic(err)
	}
	go func() { _ = c.Start(ctx) }()
	if _, err := informers.For[*corev1.ConfigMap](c, informers.Selection{}); err != nil {
		panic(err)
	}

	var secret corev1.Secret
	err = c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "token"}, &secret)
	if errors.Is(err, informers.ErrNotWatched) {
		fmt.Println(err) // names v1 Secret, typed, and the ways to fix it
	}
	for _, st := range c.Stats() {
		fmt.Printf("%s: %d objects, about %d bytes\n", st.Description, st.Objects, st.Bytes)
	}
}
