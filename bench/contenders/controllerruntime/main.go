// Command controllerruntime is the benchmark's controller-runtime contender,
// set up as a kubebuilder v4 scaffold sets up main.go: zap development
// logger, a manager with the default cache and client, metrics off (the
// scaffold's default bind address is "0"), no leader election, and a
// reconciler that Gets the object through the manager's (cache-backed)
// client. Only the probe server is off, so no port is taken. For the
// parents workload the reconciler is the kubebuilder book's (apps.go).
package main

import (
	"context"
	"flag"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/bench/internal/report"
	"github.com/converge-dev/converge/bench/internal/workload"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(workload.AddToScheme(scheme))
}

func main() {
	kind := flag.String("kind", "configmaps", "workload: configmaps, pods or widgets")
	workers := flag.Int("workers", 4, "concurrent reconciles")
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is registered by controller-runtime
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")
	report.Start()

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		setupLog.Error(err, "unable to start manager")
		os.Exit(1)
	}
	c := mgr.GetClient()
	setReads(c, workload.Kind(*kind))
	copts := controller.Options{MaxConcurrentReconciles: *workers}
	switch workload.Kind(*kind) {
	case workload.ConfigMaps:
		err = setup(mgr, copts, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, c, workload.ConfigMapGen)
	case workload.Pods:
		err = setup(mgr, copts, func() *corev1.Pod { return &corev1.Pod{} }, c, workload.PodGen)
	case workload.Widgets:
		err = setup(mgr, copts, func() *workload.Widget { return &workload.Widget{} }, c, workload.WidgetGen)
	case workload.Parents:
		err = (&AppReconciler{Client: c, Scheme: mgr.GetScheme()}).SetupWithManager(mgr, copts)
	}
	if err != nil {
		setupLog.Error(err, "unable to create controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
	report.Stop()
}

// reconciler is what `kubebuilder create api` scaffolds, with a Get and a report.
type reconciler[T client.Object] struct {
	client.Client
	newObj func() T
	gen    func(T) string
}

func (r *reconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObj()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	report.Seen(obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion(), r.gen(obj))
	return ctrl.Result{}, nil
}

func setup[T client.Object](mgr ctrl.Manager, opts controller.Options, newObj func() T, c client.Client, gen func(T) string) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(newObj()).
		Named("bench").
		WithOptions(opts).
		Complete(&reconciler[T]{Client: c, newObj: newObj, gen: gen})
}
