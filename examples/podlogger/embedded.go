package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
)

// config loads the cluster configuration, or starts an embedded control plane
// with a demo load when there is none. cleanup stops what config started.
func config(ctx context.Context, flags *framework.Flags, log logr.Logger) (*rest.Config, func(), error) {
	cfg, err := flags.Config()
	if err == nil || !errors.Is(err, framework.ErrNoConfig) {
		return cfg, func() {}, err
	}
	log.Info("no kubeconfig found: starting an embedded control plane (etcd + kube-apiserver)")
	env := envtest.New(envtest.Options{})
	start := time.Now()
	if cfg, err = env.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("start embedded control plane: %w", err)
	}
	log.Info("embedded control plane ready", "took", time.Since(start).Round(time.Millisecond), "kubeconfig", env.KubeconfigPath())
	demoCtx, stopDemo := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := demo(demoCtx, cfg, log); err != nil && demoCtx.Err() == nil {
			log.Error(err, "demo load failed")
		}
	}()
	return cfg, func() {
		stopDemo()
		<-done
		if err := env.Stop(); err != nil {
			log.Error(err, "stop embedded control plane")
		}
	}, nil
}

// demo creates, changes and deletes a few pods over about 20 seconds, the way
// a scheduler and kubelets would, so the podlogger has something to log.
func demo(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pods := cs.CoreV1().Pods("default")
	names := []string{"web-1", "web-2", "batch-1"}
	step := func(msg string, f func(name string) error) error {
		if err := sleep(ctx, 3*time.Second); err != nil {
			return err
		}
		log.Info("demo: " + msg)
		for _, n := range names {
			if err := f(n); err != nil {
				return fmt.Errorf("demo %s %s: %w", msg, n, err)
			}
		}
		return nil
	}
	setStatus := func(name string, phase corev1.PodPhase, ready corev1.ConditionStatus) error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = phase
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}
	steps := []struct {
		msg string
		f   func(name string) error
	}{
		{"creating pods", func(n string) error {
			_, err := pods.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"app": "demo"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx"}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{"scheduling pods to node-a", func(n string) error {
			return pods.Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: n},
				Target:     corev1.ObjectReference{Kind: "Node", Name: "node-a"},
			}, metav1.CreateOptions{})
		}},
		{"pods running and ready", func(n string) error { return setStatus(n, corev1.PodRunning, corev1.ConditionTrue) }},
		{"pods failing readiness", func(n string) error { return setStatus(n, corev1.PodRunning, corev1.ConditionFalse) }},
		{"deleting pods", func(n string) error {
			// No kubelet runs here to confirm a graceful deletion: delete at once.
			return pods.Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}},
	}
	for _, s := range steps {
		if err := step(s.msg, s.f); err != nil {
			return err
		}
	}
	if err := sleep(ctx, time.Second); err != nil {
		return err
	}
	log.Info("demo finished; the control plane keeps running: create pods with the kubeconfig above, Ctrl-C to stop")
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
