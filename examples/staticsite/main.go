// Command staticsite runs the StaticSite controller: for each StaticSite it
// declares a ConfigMap with the pages, an nginx Deployment serving them, a
// Service, and (when spec.minAvailable is set) a PodDisruptionBudget. converge
// applies, owns, prunes and watches them and writes the status.
//
// With no kubeconfig it starts an embedded control plane, installs the CRD
// and creates a sample site.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/examples/staticsite/site"
	"github.com/converge-dev/converge/framework"
)

// setup registers the StaticSite controller with mgr.
func setup(mgr *framework.Manager) error {
	if err := v1alpha1.AddToScheme(mgr.Scheme()); err != nil {
		return err
	}
	d, err := declarative.New(mgr, declarative.Func[*v1alpha1.StaticSite](site.Desired), declarative.Options{
		ChildKinds: site.Children(),
	})
	if err != nil {
		return err
	}
	return framework.NewBuilder[*v1alpha1.StaticSite](mgr, "staticsite", framework.ControllerOptions{}).Complete(d)
}

func main() {
	flags := framework.Flags{LeaderElectionID: "staticsite", HealthProbeBindAddress: ":8081"}
	flags.Register(nil)
	flag.Parse()
	if err := run(framework.SignalContext(context.Background()), &flags); err != nil {
		fmt.Fprintln(os.Stderr, "staticsite:", err)
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
	if err := setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
