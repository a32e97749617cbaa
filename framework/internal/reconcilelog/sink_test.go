package reconcilelog

import (
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestReconcileLoggerNeverGetsBodyDumpLevels(t *testing.T) {
	verbose := funcr.New(func(string, string) {}, funcr.Options{Verbosity: 10})
	sink := &Sink{Base: verbose.GetSink(), Deeper: Deeper(verbose.GetSink())}
	if !sink.Enabled(7) || sink.Enabled(8) || sink.WithValues("k", "v").Enabled(8) {
		t.Error("a reconcile's logger must drop V(8) and up: client-go logs request bodies through it")
	}
}
