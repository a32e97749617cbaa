package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/bench/internal/report"
	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

// setReads makes the driver's "reads" measure the manager's client, the
// one a reconcile reads with: a Get copies (or, compact, decodes) the
// cached object into one of its own, a List all of them.
func setReads(mgr *framework.Manager, k workload.Kind) {
	switch k {
	case workload.ConfigMaps:
		readsOf(mgr, k, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} })
	case workload.Pods:
		readsOf(mgr, k, func() *corev1.Pod { return &corev1.Pod{} }, func() runtime.Object { return &corev1.PodList{} })
	case workload.Widgets:
		readsOf(mgr, k, func() *workload.Widget { return &workload.Widget{} }, func() runtime.Object { return &workload.WidgetList{} })
	}
}

func readsOf[T object.Object](mgr *framework.Manager, k workload.Kind, newObj func() T, newList func() runtime.Object) {
	c := mgr.Client()
	report.SetReads(report.Reads{
		Key: func(i int) (string, string) { return workload.Key(k, i) },
		Get: func(ctx context.Context, ns, name string) error {
			return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, newObj())
		},
		List: func(ctx context.Context, ns string) (int, error) {
			l := newList()
			err := c.List(ctx, l, informers.InNamespace(ns))
			return meta.LenList(l), err
		},
	})
}
