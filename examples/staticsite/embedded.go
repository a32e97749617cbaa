package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
)

// crdDir is the folder of the StaticSite CRD, next to this file.
func crdDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "config", "crd")
}

// config loads the cluster configuration, or starts an embedded control
// plane with the CRD and a sample site when there is none.
func config(ctx context.Context, flags *framework.Flags, log logr.Logger) (*rest.Config, func(), error) {
	cfg, err := flags.Config()
	if err == nil || !errors.Is(err, framework.ErrNoConfig) {
		return cfg, func() {}, err
	}
	log.Info("no kubeconfig found: starting an embedded control plane (etcd, kube-apiserver, kube-controller-manager)")
	env := envtest.New(envtest.Options{ControllerManager: true, CRDs: envtest.CRDOptions{Paths: []string{crdDir()}}})
	if cfg, err = env.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("start embedded control plane: %w", err)
	}
	log.Info("embedded control plane ready", "kubeconfig", env.KubeconfigPath())
	demoCtx, stopDemo := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := demo(demoCtx, cfg, log); err != nil && demoCtx.Err() == nil {
			log.Error(err, "demo failed")
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

// demo creates a site, adds a disruption budget, then removes it.
func demo(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
	mgr, err := framework.NewManager(cfg, framework.Options{Logger: log.WithName("demo")})
	if err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(mgr.Scheme()); err != nil {
		return err
	}
	c := mgr.Client()
	site := &v1alpha1.StaticSite{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"},
		Spec:       v1alpha1.StaticSiteSpec{Pages: map[string]string{"index.html": "<h1>Hello from converge</h1>"}},
	}
	log.Info("demo: creating StaticSite default/hello")
	if err := c.Create(ctx, site); err != nil {
		return err
	}
	for _, step := range []struct {
		msg   string
		patch string
	}{
		{"demo: adding a PodDisruptionBudget (spec.minAvailable=1)", `{"spec":{"minAvailable":1,"replicas":2}}`},
		{"demo: removing it again: converge prunes the PodDisruptionBudget", `{"spec":{"minAvailable":null}}`},
	} {
		if err := sleep(ctx, 4*time.Second); err != nil {
			return err
		}
		log.Info(step.msg)
		if err := c.Patch(ctx, site, types.MergePatchType, []byte(step.patch)); err != nil {
			return err
		}
	}
	log.Info("demo finished; inspect with kubectl --kubeconfig <above> get staticsites,deploy,svc,cm,pdb; Ctrl-C to stop")
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
