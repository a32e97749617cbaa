package finalizer_test

import (
	"testing"

	"github.com/converge-dev/converge/framework/explore/internal/bugs/bugtest"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/finalizer"
)

func TestExplorerCatchesTheBug(t *testing.T) {
	bugtest.Caught(t, finalizer.Options(finalizer.Buggy), "no external record outlives its DB")
}

func TestTheFixPasses(t *testing.T) {
	bugtest.Passes(t, finalizer.Options(finalizer.Fixed))
}
