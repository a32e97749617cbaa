package reconcilelog

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/converge-dev/converge/reconcile"
)

func TestReconcileLoggerNeverGetsBodyDumpLevels(t *testing.T) {
	verbose := funcr.New(func(string, string) {}, funcr.Options{Verbosity: 10})
	sink := &Sink{Base: verbose.GetSink(), Deeper: Deeper(verbose.GetSink())}
	if !sink.Enabled(7) || sink.Enabled(8) || sink.WithValues("k", "v").Enabled(8) {
		t.Error("a reconcile's logger must drop V(8) and up: client-go logs request bodies through it")
	}
}

func TestReconcileLinesNameTheClusterOfARemoteKey(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	for _, cluster := range []string{"edge-1", ""} {
		sink := &Sink{Base: base.GetSink(), Deeper: Deeper(base.GetSink()), Controller: "c", Req: reconcile.Request{Cluster: cluster, Namespace: "ns", Name: "n"}}
		logr.New(sink).Info("hello")
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `"cluster"="edge-1"`) || strings.Contains(lines[1], `"cluster"`) {
		t.Errorf("lines %q: want cluster=edge-1 on the first only (none for the manager's own cluster)", lines)
	}
}
