package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// debugServer answers the object API with st, and 401 without the token
// "t0ken" when auth is set.
func debugServer(t *testing.T, st introspect.ObjectStatus, auth bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth && r.Header.Get("Authorization") != "Bearer t0ken" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != introspect.Path+"api/object" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		st.Kind, st.Cluster, st.Namespace, st.Name = q.Get("kind"), q.Get("cluster"), q.Get("namespace"), q.Get("name")
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestExplainPrintsWhereTheObjectStands(t *testing.T) {
	now := time.Now()
	next := now.Add(28 * time.Second)
	failing := introspect.KeyStatus{
		Controller: "web", Kind: introspect.Kind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web",
		ControllerState: "running", Cached: true, Informer: informers.InformerStats{Synced: true},
		Queue:   workqueue.KeyState{Delayed: true, Due: next, DelayReason: reconcile.ReasonRetry, Retries: 5},
		History: []introspect.ReconcileRecord{{Started: now.Add(-12 * time.Second), Result: "error", Error: "quota exceeded", Reason: "retry", Failures: 5}},
	}
	converged := introspect.KeyStatus{
		Controller: "audit", Kind: failing.Kind, Namespace: "shop", Name: "web", ControllerState: "running", Cached: true,
		Informer: informers.InformerStats{Synced: true},
		History:  []introspect.ReconcileRecord{{Started: now.Add(-time.Minute), Result: "success", Reason: "change"}},
	}
	url := debugServer(t, introspect.ObjectStatus{Controllers: []introspect.KeyStatus{failing, converged}}, true)

	code, out, errOut := converge(t, "explain", "Deployment", "shop/web", "--url", url, "--token", "t0ken")
	if code != exitNotConverged {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitNotConverged, out, errOut)
	}
	for _, want := range []string{
		"Deployment shop/web in controller web:\n  delayed (retry) since 12s, next attempt in 2",
		"after 5 failures: last error: quota exceeded\n",
		"Deployment shop/web in controller audit:\n  converged: last reconciled 1m0s ago: success",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Flags after the arguments, one controller only: converged.
	if code, out, errOut := converge(t, "explain", "deployment.apps", "shop/web", "--url", url, "--token", "t0ken", "--controller", "audit"); code != 0 {
		t.Errorf("--controller audit: exit %d\n%s%s", code, out, errOut)
	}

	code, out, _ = converge(t, "explain", "--url", url, "--token", "t0ken", "-o", "json", "Deployment", "shop/web")
	var ex explanation
	if err := json.Unmarshal([]byte(out), &ex); err != nil || code != exitNotConverged || ex.Converged || len(ex.Controllers) != 2 || ex.Controllers[1].Converged != true {
		t.Errorf("-o json: exit %d, %v: %s", code, err, out)
	}

	code, _, errOut = converge(t, "explain", "Deployment", "shop/web", "--url", url)
	if code != exitUnreachable || !strings.Contains(errOut, "401 Unauthorized: pass a bearer token") {
		t.Errorf("without a token: exit %d: %s", code, errOut)
	}
}

func TestExplainReadsTheObjectInTheNamedCluster(t *testing.T) {
	kind := introspect.Kind{Group: "apps", Version: "v1", Kind: "Deployment"}
	url := debugServer(t, introspect.ObjectStatus{Controllers: []introspect.KeyStatus{
		{Controller: "fleet", Kind: kind, Cluster: "edge-1", ControllerState: "running", Cached: true, Informer: informers.InformerStats{Synced: true},
			History: []introspect.ReconcileRecord{{Started: time.Now().Add(-time.Minute), Result: "success", Reason: "change"}}},
		{Controller: "own", Kind: kind, Cluster: "edge-1", ControllerState: "running", Unwatched: true},
	}}, false)
	code, out, errOut := converge(t, "explain", "Deployment", "shop/web", "--cluster", "edge-1", "--url", url)
	if code != exitNotConverged {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitNotConverged, out, errOut)
	}
	for _, want := range []string{
		"Deployment edge-1:shop/web in controller fleet:\n  converged",
		"Deployment edge-1:shop/web in controller own:\n  not watched: controller own does not watch cluster edge-1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := converge(t, "explain", "Deployment", "shop/web", "--cluster", "edge-1", "--controller", "fleet", "--url", url); code != 0 {
		t.Errorf("--controller fleet: exit %d, want 0 (converged in edge-1)\n%s", code, out)
	}
}

func TestExplainNeverSeen(t *testing.T) {
	url := debugServer(t, introspect.ObjectStatus{Controllers: []introspect.KeyStatus{{
		Controller: "web", Kind: introspect.Kind{Group: "apps", Version: "v1", Kind: "Deployment"}, ControllerState: "syncing",
		Informer: informers.InformerStats{Err: errors.New("cache for apps/v1 Deployment not ready: forbidden: the controller's identity may not list and watch deployments.apps")},
	}}}, false)
	code, out, _ := converge(t, "explain", "Deployment", "shop/web", "--url", url)
	if code != exitNotConverged || !strings.Contains(out, "never seen: the informer for apps/v1 Deployment is not synced: cache for apps/v1 Deployment not ready: forbidden") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// Input naming nothing the manager reconciles is bad input (exit 2), and
// the error says what there is.
func TestExplainBadInputSaysWhatThereIs(t *testing.T) {
	deployment := introspect.Kind{Group: "apps", Version: "v1", Kind: "Deployment"}
	configMap := introspect.Kind{Version: "v1", Kind: "ConfigMap"}
	kinds := debugServer(t, introspect.ObjectStatus{Kinds: []introspect.Kind{deployment, configMap}}, false)
	code, out, errOut := converge(t, "explain", "Deploymnt", "shop/web", "--url", kinds)
	if code != exitBadInput || out != "" || !strings.Contains(errOut, `no controller of the manager reconciles kind "Deploymnt": did you mean Deployment? It reconciles apps/v1 Deployment, v1 ConfigMap`) {
		t.Errorf("mistyped kind: exit %d:\n%s%s", code, out, errOut)
	}
	code, _, errOut = converge(t, "explain", "Widget", "shop/w", "--url", kinds)
	if code != exitBadInput || strings.Contains(errOut, "did you mean") || !strings.Contains(errOut, `reconciles kind "Widget". It reconciles apps/v1 Deployment, v1 ConfigMap.`) {
		t.Errorf("unknown kind: exit %d: %s", code, errOut)
	}
	app := introspect.Kind{Group: "example.com", Version: "v1", Kind: "App"}
	watched := debugServer(t, introspect.ObjectStatus{Kinds: []introspect.Kind{app}, WatchedBy: []introspect.Watcher{{Controller: "app", Kind: app}}}, false)
	code, _, errOut = converge(t, "explain", "ConfigMap", "shop/shop-config", "--url", watched)
	if code != exitBadInput || !strings.Contains(errOut, `no controller of the manager reconciles kind "ConfigMap". Controller app watches it for its App objects (a child of one, say): explain that App. It reconciles example.com/v1 App.`) {
		t.Errorf("a watched kind: exit %d: %s", code, errOut)
	}

	notCached := introspect.KeyStatus{Controller: "web", Kind: deployment, Name: "web", ControllerState: "running", Scope: introspect.ScopeNamespaced,
		Informer: informers.InformerStats{Synced: true, Description: "apps/v1 Deployment"}}
	url := debugServer(t, introspect.ObjectStatus{Controllers: []introspect.KeyStatus{notCached}}, false)
	code, _, errOut = converge(t, "explain", "Deployment", "web", "--url", url)
	if code != exitBadInput || !strings.Contains(errOut, "Deployment is namespaced: name the object NAMESPACE/web") {
		t.Errorf("forgotten namespace: exit %d: %s", code, errOut)
	}
	notCached.Namespace = "shop"
	url = debugServer(t, introspect.ObjectStatus{Controllers: []introspect.KeyStatus{notCached}}, false)
	code, out, _ = converge(t, "explain", "Deployment", "shop/web", "--url", url)
	if code != exitNotConverged || !strings.Contains(out, "never seen: apps/v1 Deployment holds no Deployment shop/web") {
		t.Errorf("a namespace given: exit %d:\n%s", code, out)
	}
	code, _, errOut = converge(t, "explain", "Deployment", "shop/web", "--url", url, "--controller", "webb")
	if code != exitBadInput || !strings.Contains(errOut, `no controller named "webb" reconciles Deployment: its controllers are web`) {
		t.Errorf("--controller naming none: exit %d: %s", code, errOut)
	}
}

func TestExplainBadCommandLines(t *testing.T) {
	for _, args := range [][]string{
		{"explain"},
		{"explain", "Deployment"},
		{"explain", "Deployment", "a/b/c"},
		{"explain", "Deployment", "ns/", "--url", "http://localhost:1"},
		{"explain", "Deployment", "ns/web", "-o", "yaml"},
		{"explain", "Deployment", "ns/web", "--url", "localhost:8443"},
	} {
		if code, _, errOut := converge(t, args...); code != 2 || !strings.Contains(errOut, "--help") {
			t.Errorf("%q: exit %d, want 2 with a hint: %s", args, code, errOut)
		}
	}
	code, _, errOut := converge(t, "explain", "Deployment", "ns/web", "--url", "http://127.0.0.1:1", "--timeout", "5s")
	if code != exitUnreachable || !strings.Contains(errOut, "is the manager running") || strings.Count(errOut, "127.0.0.1:1/") != 1 {
		t.Errorf("nothing listening: exit %d: %s", code, errOut)
	}
}

// A one-letter flag reads as one in the help: -o, not --o.
func TestExplainHelpSpellsOneLetterFlags(t *testing.T) {
	_, out, _ := converge(t, "explain", "--help")
	if !strings.Contains(out, "\n  -o string\n") || strings.Contains(out, "--o ") || !strings.Contains(out, "\n  --url URL\n") {
		t.Errorf("explain --help:\n%s", out)
	}
}
