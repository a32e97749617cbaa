package stalestatus_test

import (
	"testing"

	"github.com/converge-dev/converge/framework/explore/internal/bugs/bugtest"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/stalestatus"
)

func TestExplorerCatchesTheBug(t *testing.T) {
	bugtest.Caught(t, stalestatus.Options(stalestatus.Buggy), "the DB's status shows its StatefulSet's ready replicas")
}

func TestTheFixPasses(t *testing.T) {
	bugtest.Passes(t, stalestatus.Options(stalestatus.Fixed))
}
