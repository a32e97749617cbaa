package noretry_test

import (
	"testing"

	"github.com/converge-dev/converge/framework/explore/internal/bugs/bugtest"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/noretry"
)

func TestExplorerCatchesTheBug(t *testing.T) {
	bugtest.Caught(t, noretry.Options(noretry.Buggy), "status.observedGeneration is the generation")
}

func TestTheFixPasses(t *testing.T) {
	bugtest.Passes(t, noretry.Options(noretry.Fixed))
}
