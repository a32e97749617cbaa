package client_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/testenv"
)

// plane is the control plane shared by this package's integration tests,
// started on first use.
var plane testenv.Plane

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

func envtestUser(name string) envtest.User { return envtest.User{Name: name} }

// newManager returns a manager on cfg that logs nothing.
func newManager(t *testing.T, cfg *rest.Config, opts framework.Options) *framework.Manager {
	t.Helper()
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	mgr, err := framework.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}
