package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/bench/internal/report"
	"github.com/converge-dev/converge/bench/internal/workload"
)

// setReads makes the driver's "reads" measure the manager's client, the
// cache-backed one the scaffolded reconciler Gets with: each read deep
// copies the cached object into one of its own.
func setReads(c client.Client, k workload.Kind) {
	switch k {
	case workload.ConfigMaps:
		readsOf(c, k, func() client.Object { return &corev1.ConfigMap{} }, func() client.ObjectList { return &corev1.ConfigMapList{} })
	case workload.Pods:
		readsOf(c, k, func() client.Object { return &corev1.Pod{} }, func() client.ObjectList { return &corev1.PodList{} })
	case workload.Widgets:
		readsOf(c, k, func() client.Object { return &workload.Widget{} }, func() client.ObjectList { return &workload.WidgetList{} })
	}
}

func readsOf(c client.Client, k workload.Kind, newObj func() client.Object, newList func() client.ObjectList) {
	report.SetReads(report.Reads{
		Key: func(i int) (string, string) { return workload.Key(k, i) },
		Get: func(ctx context.Context, ns, name string) error {
			return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, newObj())
		},
		List: func(ctx context.Context, ns string) (int, error) {
			l := newList()
			err := c.List(ctx, l, client.InNamespace(ns))
			return meta.LenList(l), err
		},
	})
}
