package klogcap_test

import (
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/converge-dev/converge/internal/klogcap"
)

func TestClientGoNeverGetsBodyDumpLevels(t *testing.T) {
	verbose := funcr.New(func(string, string) {}, funcr.Options{Verbosity: 10})
	capped := klogcap.Logger(verbose)
	if !capped.V(7).Enabled() || capped.V(8).Enabled() || capped.WithValues("k", "v").WithName("n").V(9).Enabled() {
		t.Error("Logger must keep V(7) and drop V(8) and up, also after WithValues and WithName")
	}
	if klogcap.Logger(capped).GetSink() != capped.GetSink() {
		t.Error("capping a capped logger must return it unchanged")
	}
	sink := klogcap.Sink(verbose.GetSink())
	if !sink.Enabled(7) || sink.Enabled(8) || sink.WithName("n").WithValues("k", "v").Enabled(8) {
		t.Error("Sink must keep V(7) and drop V(8) and up, also after WithValues and WithName")
	}
}
