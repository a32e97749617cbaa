package declarative_test

import (
	"net/http"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/internal/testenv"
)

func hasEvent(t *testing.T, r *graphRig, reason string) bool {
	t.Helper()
	return countEvents(t, r, reason) > 0
}

// countEvents counts the Warning Events of reason on the parent, counting
// an Event's series (repeats folded into one Event) as its count.
func countEvents(t *testing.T, r *graphRig, reason string) int {
	t.Helper()
	cs, err := kubernetes.NewForConfig(r.mgr.Config())
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.EventsV1().Events("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == reason && e.Type == corev1.EventTypeWarning {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

// debugObject returns the debug endpoint's JSON answer about an object.
func debugObject(t *testing.T, mgr *framework.Manager, kind, ns, name string) string {
	t.Helper()
	code, body := testenv.MetricsGet(t, mgr, introspect.Path+"api/object?"+url.Values{"kind": {kind}, "namespace": {ns}, "name": {name}}.Encode())
	if code != http.StatusOK {
		t.Fatalf("debug object %s/%s: %d: %s", ns, name, code, body)
	}
	return body
}

// panics returns the reconcile panics the rig's manager counted.
func panics(t *testing.T, r *graphRig) float64 {
	t.Helper()
	mfs, err := r.mgr.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "controller_runtime_reconcile_panics_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
