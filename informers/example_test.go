package informers_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

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
