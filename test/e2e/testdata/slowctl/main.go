// Command slowctl is a test program for the e2e suite's graceful shutdown
// specs: a manager whose controller reconciles the ConfigMaps of one
// namespace slowly, and reports each reconcile on standard output, one line
// per event:
//
//	begin <unix nanoseconds> <name>
//	end <unix nanoseconds> <name>
//	cancelled <unix nanoseconds> <name>
//	signal <unix nanoseconds>
//	stopped <unix nanoseconds> <error or "ok">
//
// "end" is a reconcile that did its work; "cancelled" one whose context ended
// first. It stops on SIGTERM or SIGINT through framework.SignalContext, and
// exits 0 when Manager.Start returns nil.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// report writes one line to standard output; lines never interleave.
var report = func() func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
}()

func main() {
	var (
		kubeconfig = flag.String("kubeconfig", "", "kubeconfig of the cluster")
		namespace  = flag.String("namespace", "", "namespace whose ConfigMaps are reconciled")
		workers    = flag.Int("workers", 10, "workers")
		work       = flag.Duration("work", 3*time.Second, "how long each reconcile works")
		grace      = flag.Duration("grace", 10*time.Second, "Options.GracefulShutdownTimeout")
	)
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *workers, *work, *grace); err != nil {
		fmt.Fprintln(os.Stderr, "slowctl:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace string, workers int, work, grace time.Duration) error {
	ctx := framework.SignalContext(context.Background())
	go func() {
		<-ctx.Done()
		report("signal %d", time.Now().UnixNano())
	}()
	log, err := framework.NewLogger(framework.LogOptions{Verbosity: 1})
	if err != nil {
		return err
	}
	cfg, err := framework.LoadConfig(kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := framework.NewManager(cfg, framework.Options{
		Logger:                  log,
		Cache:                   informers.Options{Namespace: namespace},
		GracefulShutdownTimeout: grace,
	})
	if err != nil {
		return err
	}
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "slowctl", framework.ControllerOptions{Workers: workers}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			report("begin %d %s", time.Now().UnixNano(), req.Name)
			t := time.NewTimer(work)
			defer t.Stop()
			select {
			case <-t.C:
				report("end %d %s", time.Now().UnixNano(), req.Name)
				return reconcile.Result{}, nil
			case <-ctx.Done():
				report("cancelled %d %s", time.Now().UnixNano(), req.Name)
				return reconcile.Result{}, ctx.Err()
			}
		}))
	if err != nil {
		return err
	}
	err = mgr.Start(ctx)
	outcome := "ok"
	if err != nil {
		outcome = err.Error()
	}
	report("stopped %d %s", time.Now().UnixNano(), outcome)
	return err
}
