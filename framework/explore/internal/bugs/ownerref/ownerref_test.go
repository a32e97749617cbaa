package ownerref_test

import (
	"testing"

	"github.com/converge-dev/converge/framework/explore/internal/bugs/bugtest"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/ownerref"
)

func TestExplorerCatchesTheBug(t *testing.T) {
	bugtest.Caught(t, ownerref.Options(ownerref.Buggy), "every Secret is controlled by a DB")
}

func TestTheFixPasses(t *testing.T) {
	bugtest.Passes(t, ownerref.Options(ownerref.Fixed))
}
