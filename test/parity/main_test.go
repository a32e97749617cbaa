// Package parity runs one table of request sequences against the fake API
// server (framework/fake) and against a real kube-apiserver (envtest), and
// fails when the two answer a step differently (status code and reason, and
// the resulting fields and field owners a row names) or when either departs
// from what the row expects. With -short only the fake is checked against the
// table.
package parity_test

import (
	"os"
	"testing"

	"github.com/converge-dev/converge/internal/testenv"
)

// plane is the control plane the table runs on, started on first use.
var plane testenv.Plane

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }
