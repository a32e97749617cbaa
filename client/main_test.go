package client_test

import (
	"os"
	"testing"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/testenv"
)

// plane is the control plane shared by this package's integration tests,
// started on first use.
var plane testenv.Plane

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

func envtestUser(name string) envtest.User { return envtest.User{Name: name} }
