package tlscreate_test

import (
	"testing"

	"github.com/converge-dev/converge/framework/explore/internal/bugs/bugtest"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/tlscreate"
)

func TestExplorerCatchesTheBug(t *testing.T) {
	bugtest.Caught(t, tlscreate.Options(tlscreate.Buggy), "each DB has both TLS Secrets")
}

func TestTheFixPasses(t *testing.T) {
	bugtest.Passes(t, tlscreate.Options(tlscreate.Fixed))
}
