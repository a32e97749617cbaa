package staledelete_test

import (
	"testing"

	"github.com/converge-dev/converge/framework/explore/internal/bugs/bugtest"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/staledelete"
)

func TestExplorerCatchesTheBug(t *testing.T) {
	bugtest.Caught(t, staledelete.Options(staledelete.Buggy), "deletes")
}

func TestTheFixPasses(t *testing.T) {
	bugtest.Passes(t, staledelete.Options(staledelete.Fixed))
}
