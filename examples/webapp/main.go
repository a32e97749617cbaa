// Command webapp runs the WebApp controller, the example of ordered
// children: for each WebApp it declares a ConfigMap of settings, a Job that
// migrates the database schema for the current image, a Deployment that
// gets the image once the migration is Complete, a Service once the
// Deployment serves, and (when spec.minAvailable is set) a
// PodDisruptionBudget. converge applies them in that order, deletes them
// in reverse, and writes a Ready condition naming the first child in the
// way.
//
// It needs a cluster with the CRD of config/crd installed:
//
//	kubectl apply -f examples/webapp/config/crd
//	go run ./examples/webapp --kubeconfig ~/.kube/config
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/webapp/api/v1alpha1"
	"github.com/converge-dev/converge/examples/webapp/app"
	"github.com/converge-dev/converge/framework"
)

// setup registers the WebApp controller with mgr.
func setup(mgr *framework.Manager) error {
	if err := v1alpha1.AddToScheme(mgr.Scheme()); err != nil {
		return err
	}
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.WebApp](app.Desired), declarative.Options{
		ChildKinds: app.Children(),
	})
	if err != nil {
		return err
	}
	return framework.NewBuilder[*v1alpha1.WebApp](mgr, "webapp", framework.ControllerOptions{}).Complete(d)
}

func main() {
	flags := framework.Flags{LeaderElectionID: "webapp", HealthProbeBindAddress: ":8081"}
	flags.Register(nil)
	flag.Parse()
	if err := run(framework.SignalContext(context.Background()), &flags); err != nil {
		fmt.Fprintln(os.Stderr, "webapp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, flags *framework.Flags) error {
	opts, err := flags.Options()
	if err != nil {
		return err
	}
	cfg, err := flags.Config()
	if err != nil {
		return err
	}
	mgr, err := framework.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
