package declarative

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/reconcile"
)

func TestSiteOfRegistersTheParentBeforeItLooksAtTheCluster(t *testing.T) {
	// An engagement, or a return to health, that lands between a parent's
	// look at its child's cluster and its registration among the parents
	// that wait for it would wake nobody: the registration comes first.
	// Here the look cannot even be made (no manager): the parent is
	// registered all the same.
	d := &Declarative[*corev1.ConfigMap]{}
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "site"}}
	func() {
		defer func() { _ = recover() }()
		_, _, _ = d.siteOf("edge-1", parent)
	}()
	if got := d.clusterWaits.take("edge-1"); !slices.Equal(got, []reconcile.Request{{Namespace: "ns", Name: "site"}}) {
		t.Errorf("parents waiting for edge-1 after a look at it = %v, want ns/site", got)
	}
	if _, away, err := d.siteOf("", parent); away != "" || err != nil || len(d.clusterWaits.take("")) != 0 {
		t.Errorf("the manager's own cluster is always there: nothing waits for it (away %q, err %v)", away, err)
	}
}
