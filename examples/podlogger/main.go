// Command podlogger logs pods as they appear, change phase, readiness or node,
// and disappear: converge's first example, a level-triggered reconciler that
// reads pods from the shared cache.
//
// With --kubeconfig (or $KUBECONFIG, ~/.kube/config, or a pod's service
// account) it watches that cluster; with none, it starts an embedded control
// plane and a short demo load. See --help for metrics, probes, leader election
// and logging flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"

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
	ready := false
	for _, c := range pod.Status.Conditions {
		ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}
	state := fmt.Sprintf("phase=%s ready=%t node=%q deleting=%t", pod.Status.Phase, ready, pod.Spec.NodeName, pod.DeletionTimestamp != nil)
	p.mu.Lock()
	before, known := p.seen[reconcile.Request{Namespace: pod.Namespace, Name: pod.Name}]
	p.seen[reconcile.Request{Namespace: pod.Namespace, Name: pod.Name}] = state
	p.mu.Unlock()
	if !known {
		logr.FromContextOrDiscard(ctx).Info("pod appeared", "state", state)
	} else if before != state {
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

func main() {
	flags := framework.Flags{LeaderElectionID: "podlogger", HealthProbeBindAddress: ":8081"}
	flags.Register(nil)
	flag.Parse()
	if err := run(framework.SignalContext(context.Background()), &flags); err != nil {
		fmt.Fprintln(os.Stderr, "podlogger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, flags *framework.Flags) error {
	opts, err := flags.Options()
	if err != nil {
		return err
	}
	cfg, cleanup, err := config(ctx, flags, opts.Logger) // the cluster, or an embedded control plane
	if err != nil {
		return err
	}
	defer cleanup()
	mgr, err := framework.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	err = framework.NewBuilder[*corev1.Pod](mgr, "podlogger", framework.ControllerOptions{}).
		Complete(&podLogger{seen: map[reconcile.Request]string{}})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
