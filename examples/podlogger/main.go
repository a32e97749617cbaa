// Command podlogger logs pods as they appear, change phase, readiness or node,
// and disappear. It is converge's first example: a level-triggered reconciler
// that reads pods from the shared cache.
//
// With --kubeconfig (or $KUBECONFIG, ~/.kube/config, or a pod's service
// account) it watches that cluster; with none, it starts an embedded control
// plane and a short demo load.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// podLogger remembers what it last logged per pod, to log only changes.
type podLogger struct {
	mu   sync.Mutex
	seen map[reconcile.Request]string
}

func (p *podLogger) Reconcile(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	state := fmt.Sprintf("phase=%s ready=%t node=%q deleting=%t", pod.Status.Phase, isReady(pod), pod.Spec.NodeName, pod.DeletionTimestamp != nil)
	key := reconcile.Request{Namespace: pod.Namespace, Name: pod.Name}
	p.mu.Lock()
	before, known := p.seen[key]
	p.seen[key] = state
	p.mu.Unlock()
	switch {
	case !known:
		logr.FromContextOrDiscard(ctx).Info("pod appeared", "state", state)
	case before != state:
		logr.FromContextOrDiscard(ctx).Info("pod changed", "from", before, "to", state)
	}
	return reconcile.Result{}, nil
}

func (p *podLogger) ReconcileDeleted(ctx context.Context, gone reconcile.Tombstone[*corev1.Pod]) (reconcile.Result, error) {
	p.mu.Lock()
	delete(p.seen, gone.Request)
	p.mu.Unlock()
	logr.FromContextOrDiscard(ctx).Info("pod disappeared")
	return reconcile.Result{}, nil
}

func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig; empty means $KUBECONFIG, ~/.kube/config, in-cluster, or an embedded control plane")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "podlogger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig string) error {
	cfg, cleanup, err := config(ctx, kubeconfig)
	if err != nil {
		return err
	}
	defer cleanup()
	mgr, err := framework.NewManager(cfg, framework.Options{})
	if err != nil {
		return err
	}
	err = framework.NewController[*corev1.Pod](mgr, "podlogger", framework.ControllerOptions{}).
		Complete(&podLogger{seen: map[reconcile.Request]string{}})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
