package main

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

func main() {
	if err := run(framework.SignalContext(context.Background())); err != nil { // SIGINT or SIGTERM: graceful stop
		fmt.Fprintln(os.Stderr, "pod-phases:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	log, err := framework.NewLogger(framework.LogOptions{}) // slog text on stderr; client-go's klog lines go through it
	if err != nil {
		return err
	}
	mgr, err := framework.NewManager(nil, framework.Options{Logger: log}) // kubeconfig or in-cluster
	if err != nil {
		return err
	}
	err = framework.NewBuilder[*corev1.Pod](mgr, "pod-phases", framework.ControllerOptions{}).
		Owns(&corev1.ConfigMap{}). // a change to a ConfigMap a pod controls reconciles the pod
		Complete(reconcile.ObjectFunc[*corev1.Pod](func(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
			logr.FromContextOrDiscard(ctx).Info("pod", "phase", pod.Status.Phase, "node", pod.Spec.NodeName)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx) // nil after a clean shutdown: the process exits 0
}
