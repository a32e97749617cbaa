package introspect_test

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// A Blocker its last reconcile noted keeps an object from converging, and
// Explain says it in the words of its reason, with how long it lasts.
func TestExplainSaysWhatBlocksAnObject(t *testing.T) {
	now := time.Now()
	started := now.Add(-3 * time.Second)
	key := func(r introspect.ReconcileRecord) introspect.KeyStatus {
		r.Started, r.Reason = started, "change"
		return introspect.KeyStatus{Controller: "c", Namespace: "ns", Name: "a", ControllerState: "running", Cached: true,
			Informer: informers.InformerStats{Synced: true}, History: []introspect.ReconcileRecord{r}}
	}
	for _, tc := range []struct {
		name      string
		rec       introspect.ReconcileRecord
		want      []string // lines
		converged bool
	}{
		{"nothing noted", introspect.ReconcileRecord{Result: "success"}, []string{"converged: last reconciled 3s ago: success in 0s (change)"}, true},
		{"waiting", introspect.ReconcileRecord{Result: "success", Blocked: &reconcile.Blocker{Reason: "Waiting", Message: "Deployment web waits for Job migrate (succeeded)", Since: now.Add(-2 * time.Minute)}},
			[]string{"waiting: Deployment web waits for Job migrate (succeeded) (for 2m0s)", "last reconciled 3s ago: success in 0s (change)"}, false},
		{"not ready, since unknown", introspect.ReconcileRecord{Result: "success", Blocked: &reconcile.Blocker{Reason: "NotReady", Message: "Deployment web is not ready yet (Available)"}},
			[]string{"not ready: Deployment web is not ready yet (Available)", "last reconciled 3s ago: success in 0s (change)"}, false},
		{"a requeue does not hide it", introspect.ReconcileRecord{Result: "requeue_after", RequeueAfterSeconds: 30, Blocked: &reconcile.Blocker{Reason: "ChildFailed", Message: "Job migrate failed (BackoffLimitExceeded)"}},
			[]string{"child failed: Job migrate failed (BackoffLimitExceeded)", "last reconciled 3s ago: requeue_after in 0s (change), requeued after 30s"}, false},
		{"an acronym", introspect.ReconcileRecord{Result: "success", Blocked: &reconcile.Blocker{Reason: "CRDMissing", Message: "widgets.example.com is not installed"}},
			[]string{"crd missing: widgets.example.com is not installed", "last reconciled 3s ago: success in 0s (change)"}, false},
		{"said once when it is the error", introspect.ReconcileRecord{Result: "terminal", Error: "terminal error: Site ns/a: children: a cycle", Blocked: &reconcile.Blocker{Reason: "InvalidChildGraph", Message: "Site ns/a: children: a cycle"}},
			[]string{"failed 3s ago with a terminal error, not retried until the object changes: Site ns/a: children: a cycle"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, converged := key(tc.rec).Explain(now)
			if converged != tc.converged || strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("explained as converged=%v:\n%s\nwant converged=%v:\n%s", converged, strings.Join(lines, "\n"), tc.converged, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A key never seen, named without the namespace its kind needs (or with
// one its kind has not), is said to be misnamed.
func TestExplainSaysAKeyIsMisnamed(t *testing.T) {
	for _, tc := range []struct {
		scope, namespace, want string
	}{
		{introspect.ScopeNamespaced, "", "never seen: ConfigMap is namespaced and no namespace was given: name it NAMESPACE/a"},
		{introspect.ScopeCluster, "ns", "never seen: ConfigMap is cluster-scoped and a namespace was given: name it a, without ns/"},
		{introspect.ScopeNamespaced, "ns", "never seen: v1 ConfigMap holds no ConfigMap ns/a (no such object, or outside the controller's selection)"},
		{"", "", "never seen: v1 ConfigMap holds no ConfigMap a (no such object, or outside the controller's selection)"},
	} {
		ks := introspect.KeyStatus{Controller: "c", Kind: introspect.Kind{Version: "v1", Kind: "ConfigMap"}, Namespace: tc.namespace, Name: "a",
			ControllerState: "running", Scope: tc.scope, Informer: informers.InformerStats{Synced: true, Description: "v1 ConfigMap"}}
		if lines, converged := ks.Explain(time.Now()); converged || len(lines) != 1 || lines[0] != tc.want {
			t.Errorf("scope %q, namespace %q: explained as converged=%v: %q, want %q", tc.scope, tc.namespace, converged, lines, tc.want)
		}
	}
}

// An object its informer no longer holds, after a reconcile that
// succeeded (the reconcile of its deletion, say), is gone: not converged.
func TestExplainSaysADeletedObjectIsGone(t *testing.T) {
	now := time.Now()
	ks := introspect.KeyStatus{Controller: "c", Kind: introspect.Kind{Group: "example.com", Version: "v1", Kind: "App"}, Namespace: "ns", Name: "a",
		ControllerState: "running", Informer: informers.InformerStats{Synced: true, Description: "example.com/v1 App"},
		History: []introspect.ReconcileRecord{{Started: now.Add(-7 * time.Second), Result: "success", Reason: "change"}}}
	lines, converged := ks.Explain(now)
	want := []string{"gone: example.com/v1 App holds no App ns/a any more (deleted, or out of the controller's selection)", "last reconciled 7s ago: success in 0s (change)"}
	if converged || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("explained as converged=%v:\n%s\nwant not converged:\n%s", converged, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
