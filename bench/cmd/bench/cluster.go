package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// cluster is the driver's side of the control plane: it creates, changes and
// deletes the benchmark's objects.
type cluster struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
	// quietFor is how long the write counters must stand still for a
	// phase of the parents workload to end (see waitQuiet).
	quietFor time.Duration
}

func newCluster(cfg *rest.Config) (*cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: the driver paces itself
	cfg.UserAgent = "converge-bench-driver"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{cs: cs, dyn: dyn, quietFor: defaultQuietFor}, nil
}

func namespaceFor(k workload.Kind) string { return workload.Namespace(k) }

// setUp creates the workload's namespace and its n objects, conc at a time.
func (c *cluster) setUp(ctx context.Context, k workload.Kind, n, conc int) error {
	ns := namespaceFor(k)
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		var err error
		switch k {
		case workload.ConfigMaps:
			_, err = c.cs.CoreV1().ConfigMaps(ns).Create(ctx, workload.NewConfigMap(ns, i), metav1.CreateOptions{})
		case workload.Pods:
			_, err = c.cs.CoreV1().Pods(ns).Create(ctx, workload.NewPod(ns, i), metav1.CreateOptions{})
		case workload.Widgets:
			_, err = c.dyn.Resource(workload.WidgetGVR).Namespace(ns).Create(ctx, workload.NewWidget(ns, i), metav1.CreateOptions{})
		case workload.Parents:
			_, err = c.dyn.Resource(workload.AppGVR).Namespace(ns).Create(ctx, workload.NewApp(ns, i), metav1.CreateOptions{})
		}
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("create %s %d: %w", k, i, err)
		}
		return nil
	})
}

// tearDown deletes the workload's objects.
func (c *cluster) tearDown(ctx context.Context, k workload.Kind) error {
	ns := namespaceFor(k)
	var err error
	switch k {
	case workload.ConfigMaps:
		err = c.cs.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	case workload.Pods:
		err = c.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	case workload.Widgets:
		err = c.dyn.Resource(workload.WidgetGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	case workload.Parents:
		err = c.resetParents(ctx, 0, 1)
	}
	return err
}

// waitGone waits until the objects tearDown deleted are gone: for the
// parents, their children too.
func (c *cluster) waitGone(ctx context.Context, k workload.Kind) error {
	ns := namespaceFor(k)
	one := metav1.ListOptions{Limit: 1}
	lists := []func() (int, error){}
	switch k {
	case workload.ConfigMaps:
		lists = append(lists, func() (int, error) {
			l, err := c.cs.CoreV1().ConfigMaps(ns).List(ctx, one)
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		})
	case workload.Parents:
		lists = append(lists,
			func() (int, error) {
				l, err := c.dyn.Resource(workload.AppGVR).Namespace(ns).List(ctx, one)
				if err != nil {
					return 0, err
				}
				return len(l.Items), nil
			},
			func() (int, error) {
				l, err := c.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: "app.kubernetes.io/name=bench-app"})
				if err != nil {
					return 0, err
				}
				return len(l.Items), nil
			},
			func() (int, error) {
				l, err := c.cs.AppsV1().Deployments(ns).List(ctx, one)
				if err != nil {
					return 0, err
				}
				return len(l.Items), nil
			})
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, list := range lists {
		for {
			n, err := list()
			if err != nil {
				return fmt.Errorf("%s: wait for the deleted objects to go: %w", k, err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: objects still there 5 minutes after they were deleted", k)
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// patch sets the gen of object i.
func (c *cluster) patch(ctx context.Context, k workload.Kind, i int, gen int64) error {
	ns, name, body := namespaceFor(k), workload.Name(k, i), workload.Patch(k, gen)
	var err error
	switch k {
	case workload.ConfigMaps:
		_, err = c.cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	case workload.Pods:
		_, err = c.cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	case workload.Widgets:
		_, err = c.dyn.Resource(workload.WidgetGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	}
	return err
}

// parallel runs fn for 0..n-1 on conc goroutines; the first error stops it.
func parallel(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// writer writes updates and tells the tracker before each one.
type writer struct {
	c    *cluster
	kind workload.Kind
	gen  atomic.Int64
	errs atomic.Int64
}

// update writes one update of object i in phase p to t.
func (w *writer) update(ctx context.Context, t *tracker, i int, p phase) {
	gen := w.gen.Add(1)
	t.expect(i, gen, p)
	if err := w.c.patch(ctx, w.kind, i, gen); err != nil && ctx.Err() == nil {
		w.errs.Add(1)
	}
}

// paced writes an update of each of keys at rate per second, spreading the
// requests over goroutines so a slow one does not slow the pace, until keys
// run out or stop is closed. It returns how many it wrote.
func (w *writer) paced(ctx context.Context, t *tracker, keys []int, rate float64, p phase, stop <-chan struct{}) int {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	n := 0
	for _, i := range keys {
		next := start.Add(time.Duration(n) * interval)
		if d := time.Until(next); d > 0 {
			select {
			case <-time.After(d):
			case <-stop:
				wg.Wait()
				return n
			}
		}
		select {
		case <-stop:
			wg.Wait()
			return n
		default:
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w.update(ctx, t, i, p)
		})
		n++
	}
	wg.Wait()
	return n
}

// flood writes an update of each of keys as fast as conc concurrent
// requests allow.
func (w *writer) flood(ctx context.Context, t *tracker, keys []int, conc int, p phase) {
	_ = parallel(ctx, len(keys), conc, func(ctx context.Context, j int) error {
		w.update(ctx, t, keys[j], p)
		return nil
	})
}
