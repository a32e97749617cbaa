package framework_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

func decode[V any](t *testing.T, body string) V {
	t.Helper()
	var v V
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, body)
	}
	return v
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"secret-looking": "s3cr3t-value"}}
}

// startDebugManager runs, on a fake API server, a manager serving plain
// metrics on loopback with two controllers of ConfigMaps: "outcomes" fails
// "bad", notes a wait for "waits" and succeeds otherwise; "stuck" holds its
// first key until the test ends, so its other keys stay queued.
func startDebugManager(t *testing.T, objects int) *framework.Manager {
	t.Helper()
	objs := []object.Object{configMap("good"), configMap("bad"), configMap("waits")}
	for i := range objects {
		objs = append(objs, configMap(fmt.Sprint("bulk-", i)))
	}
	srv := fake.Start(t, fake.Options{Objects: objs})
	mgr := testenv.NewManager(t, srv.Config(), framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}})
	outcomes := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		switch req.Name {
		case "bad":
			return reconcile.Result{}, errors.New("quota exceeded for ns/bad")
		case "waits":
			framework.NoteBlocked(ctx, reconcile.Blocker{Reason: "Waiting", Message: "ConfigMap waits waits for Job migrate (Complete)"})
		}
		return reconcile.Result{}, nil
	})
	if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "outcomes", framework.ControllerOptions{}).CompleteByKey(outcomes); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	stuck := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		<-release
		return reconcile.Result{}, nil
	})
	if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "stuck", framework.ControllerOptions{}).CompleteByKey(stuck); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	t.Cleanup(func() { close(release) }) // runs before the manager's stop
	testenv.Eventually(t, "metrics served", func() bool { return mgr.MetricsAddress() != "" })
	return mgr
}

func objectStatus(t *testing.T, mgr *framework.Manager, name string) introspect.KeyStatus {
	t.Helper()
	code, body := testenv.MetricsGet(t, mgr, introspect.Path+"api/object?kind=ConfigMap&namespace=ns&name="+name)
	if code != http.StatusOK {
		t.Fatalf("object %s: %d %s", name, code, body)
	}
	st := decode[introspect.ObjectStatus](t, body)
	for _, c := range st.Controllers {
		if c.Controller == "outcomes" {
			return c
		}
	}
	t.Fatalf("object %s: no state in controller outcomes: %s", name, body)
	return introspect.KeyStatus{}
}

func TestDebugExplainsEachObject(t *testing.T) {
	mgr := startDebugManager(t, 0)
	var bad introspect.KeyStatus
	testenv.Eventually(t, "bad failed twice", func() bool {
		bad = objectStatus(t, mgr, "bad")
		return bad.Queue.Retries >= 2 && len(bad.History) >= 2
	})
	if h := bad.History[0]; h.Result != "error" || h.Error != "quota exceeded for ns/bad" || h.Reason != "retry" || h.Failures < 2 {
		t.Errorf("bad's last reconcile: %+v", h)
	}
	lines, converged := bad.Explain(time.Now())
	if converged || !strings.Contains(strings.Join(lines, "\n"), "last error: quota exceeded for ns/bad") ||
		!strings.Contains(lines[0], "delayed (retry)") && !strings.Contains(lines[0], "queued (retry)") && !strings.Contains(lines[0], "in flight") {
		t.Errorf("bad explained as converged=%v: %q", converged, lines)
	}
	// The lines say what the JSON says. A key a worker holds reads "in
	// flight" first, whatever the queue says of it (the queue's state and the
	// worker's are read one after the other, so a retry may come due and be
	// taken between the two).
	if bad.InFlight == nil && strings.HasPrefix(lines[0], "delayed") != bad.Queue.Delayed || strings.HasPrefix(lines[0], "queued") != bad.Queue.Queued {
		t.Errorf("bad explained as %q, with queued=%v and delayed=%v", lines[0], bad.Queue.Queued, bad.Queue.Delayed)
	}
	if bad.Informer.Objects != 3 {
		t.Errorf("bad's informer holds %d objects, want the 3 ConfigMaps", bad.Informer.Objects)
	}

	var good introspect.KeyStatus
	testenv.Eventually(t, "good reconciled", func() bool { good = objectStatus(t, mgr, "good"); return len(good.History) > 0 })
	if lines, converged := good.Explain(time.Now()); !converged || !strings.HasPrefix(lines[0], "converged: last reconciled") {
		t.Errorf("good explained as converged=%v: %q", converged, lines)
	}

	var waits introspect.KeyStatus
	testenv.Eventually(t, "waits reconciled", func() bool { waits = objectStatus(t, mgr, "waits"); return len(waits.History) > 0 })
	if lines, converged := waits.Explain(time.Now()); converged || !strings.Contains(strings.Join(lines, "\n"), "waiting: ConfigMap waits waits for Job migrate (Complete)") {
		t.Errorf("waits explained as converged=%v: %q", converged, lines)
	}

	// The failing and the waiting keys are listed as not converged,
	// newest first; the converged one is not.
	code, body := testenv.MetricsGet(t, mgr, introspect.Path+"api/notconverged?controller=outcomes")
	nc := decode[introspect.NotConvergedPage](t, body)
	states := map[string]string{}
	for _, k := range nc.Keys {
		states[k.Name] = k.State
	}
	if code != http.StatusOK || nc.Total != 2 || states["waits"] != "waiting" || states["bad"] != "failing" && states["bad"] != "in flight" {
		t.Errorf("not converged: %d %s", code, body)
	}
	for i := 1; i < len(nc.Keys); i++ {
		if nc.Keys[i].At.After(nc.Keys[i-1].At) {
			t.Errorf("not converged keys out of order: %s", body)
		}
	}
	_, body = testenv.MetricsGet(t, mgr, introspect.Path+"api/notconverged?controller=outcomes&offset=1&limit=1")
	if second := decode[introspect.NotConvergedPage](t, body); second.Total != 2 || len(second.Keys) != 1 || states[second.Keys[0].Name] == "" {
		t.Errorf("the second page of one key: %s, want bad or waits", body)
	}

	missing := objectStatus(t, mgr, "missing")
	if lines, converged := missing.Explain(time.Now()); converged || !strings.HasPrefix(lines[0], "never seen: ") || missing.Cached {
		t.Errorf("missing explained as converged=%v: %q", converged, lines)
	}

	code, body = testenv.MetricsGet(t, mgr, introspect.Path+"api/state")
	if code != http.StatusOK {
		t.Fatalf("state: %d %s", code, body)
	}
	state := decode[introspect.State](t, body)
	if len(state.Controllers) != 2 || state.Controllers[0].Name != "outcomes" || state.Controllers[0].State != "running" ||
		state.Controllers[0].Totals.Errors < 2 || !state.Leader.Leading {
		t.Errorf("state: %s", body)
	}
	if len(state.Informers) != 1 || !state.Informers[0].Synced || state.Informers[0].Err != nil {
		t.Errorf("informers: %+v", state.Informers)
	}
	if strings.Contains(body, "s3cr3t-value") {
		t.Errorf("the state shows an object's data: %s", body)
	}
}

func TestDebugPagesTheQueueAndShowsInFlightKeys(t *testing.T) {
	const bulk = 40
	mgr := startDebugManager(t, bulk)
	var state introspect.State
	testenv.Eventually(t, "stuck holds a key and queues the rest", func() bool {
		_, body := testenv.MetricsGet(t, mgr, introspect.Path+"api/state")
		state = decode[introspect.State](t, body)
		st := state.Controllers[1]
		return len(st.InFlight) == 1 && st.Queue.Normal.Depth+st.Queue.Replay.Depth == bulk+2
	})
	held := state.Controllers[1].InFlight[0]
	if held.Worker != 1 || held.Namespace != "ns" {
		t.Errorf("in flight: %+v", held)
	}

	seen := map[string]bool{}
	for offset := 0; ; offset += 7 {
		code, body := testenv.MetricsGet(t, mgr, fmt.Sprintf("%sapi/queue?controller=stuck&offset=%d&limit=7", introspect.Path, offset))
		if code != http.StatusOK {
			t.Fatalf("queue page: %d %s", code, body)
		}
		page := decode[introspect.QueuePage](t, body)
		if page.Total != bulk+2 || len(page.Keys) > 7 {
			t.Fatalf("page at %d: total %d, %d keys", offset, page.Total, len(page.Keys))
		}
		for _, k := range page.Keys {
			if seen[k.Key.Name] {
				t.Fatalf("%s listed twice", k.Key.Name)
			}
			seen[k.Key.Name] = true
		}
		if len(page.Keys) < 7 {
			break
		}
	}
	if len(seen) != bulk+2 || seen[held.Name] {
		t.Fatalf("paged %d keys (held key listed: %v), want the %d queued", len(seen), seen[held.Name], bulk+2)
	}

	code, body := testenv.MetricsGet(t, mgr, introspect.Path+"api/key?controller=stuck&namespace=ns&name="+held.Name)
	ks := decode[introspect.KeyStatus](t, body)
	if code != http.StatusOK || ks.InFlight == nil || ks.InFlight.Worker != 1 {
		t.Fatalf("held key: %d %s", code, body)
	}
	if lines, _ := ks.Explain(time.Now()); !strings.HasPrefix(lines[0], "in flight for ") || !strings.Contains(lines[0], "on worker 1") {
		t.Errorf("held key explained as %q", lines)
	}
}

func TestDebugPageRendersControllersAndASearchedKey(t *testing.T) {
	mgr := startDebugManager(t, 0)
	testenv.Eventually(t, "bad reconciled", func() bool { return objectStatus(t, mgr, "bad").Queue.Retries >= 1 })
	code, body := testenv.MetricsGet(t, mgr, introspect.Path)
	if code != http.StatusOK || !strings.Contains(body, "outcomes") || !strings.Contains(body, "stuck") {
		t.Fatalf("GET the page: %d, want 200 naming both controllers:\n%s", code, body)
	}
	code, body = testenv.MetricsGet(t, mgr, introspect.Path+"?controller=outcomes&key=ns/bad")
	if code != http.StatusOK || !strings.Contains(body, "quota exceeded for ns/bad") {
		t.Fatalf("GET the page for ns/bad: %d, want 200 with its error:\n%s", code, body)
	}
}

func TestDebugRefusesBadRequests(t *testing.T) {
	mgr := startDebugManager(t, 0)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"api/key?controller=outcomes&namespace=ns", http.StatusBadRequest, "the name parameter is required"},
		{"api/key?controller=nope&namespace=ns&name=a", http.StatusNotFound, `no controller named \"nope\"`},
		{"api/object?namespace=ns&name=a", http.StatusBadRequest, "the kind parameter is required"},
		{"api/object?kind=ConfigMap&name=" + strings.Repeat("a", 300), http.StatusBadRequest, "at most 253 bytes"},
		{"api/queue?controller=stuck&limit=100000", http.StatusBadRequest, "limit must be between 1 and 500"},
		{"api/queue?controller=stuck&offset=-3", http.StatusBadRequest, "offset must be a non-negative integer"},
		{"api/nothing", http.StatusNotFound, "no such debug path"},
		{"static/../../metrics", http.StatusNotFound, ""},
	} {
		code, body := testenv.MetricsGet(t, mgr, introspect.Path+tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %s, want %d with %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+mgr.MetricsAddress()+introspect.Path+"api/state", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", res.StatusCode)
	}
}

func TestDebugWithPlainMetricsServesLoopbackHostsOnly(t *testing.T) {
	mgr := startDebugManager(t, 0)
	for host, want := range map[string]int{
		"":                  http.StatusOK, // the address itself, 127.0.0.1:port
		"localhost:1234":    http.StatusOK,
		"evil.example":      http.StatusForbidden, // a rebound DNS name
		"10.0.0.1:8080":     http.StatusForbidden,
		"evil.example:8080": http.StatusForbidden,
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+mgr.MetricsAddress()+introspect.Path, nil)
		if host != "" {
			req.Host = host
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, res.StatusCode, want)
		}
		if want == http.StatusOK && (!strings.Contains(string(body), `data-controller="outcomes"`) || res.Header.Get("Content-Security-Policy") == "") {
			t.Errorf("Host %q: the page lacks the controllers or its CSP:\n%s", host, body)
		}
	}
}

func TestDebugDisabled(t *testing.T) {
	srv := fake.Start(t, fake.Options{})
	mgr := testenv.NewManager(t, srv.Config(), framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true, DisableDebug: true}})
	testenv.StartManager(t, mgr)
	testenv.Eventually(t, "metrics served", func() bool { return mgr.MetricsAddress() != "" })
	if code, _ := testenv.MetricsGet(t, mgr, introspect.Path+"api/state"); code != http.StatusNotFound {
		t.Fatalf("DisableDebug: %d, want 404", code)
	}
	if code, _ := testenv.MetricsGet(t, mgr, "/metrics"); code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
}

// A sharded controller's key is explained by where its object falls in the
// ring first: a bucket this member does not serve says who does, and one
// it is still syncing or handing over says why its key waits.
func TestExplainSaysWhereAShardedObjectIs(t *testing.T) {
	byUID := sharding.Buckets{By: sharding.ByUID, Count: 32}
	byNS := sharding.Buckets{By: sharding.ByNamespace, Count: 32}
	for _, tc := range []struct {
		shard *introspect.ShardStatus
		want  string
		alone bool // the shard's line is the only one
	}{
		{&introspect.ShardStatus{Bucket: 7, Buckets: byNS, Holder: "replica-2"}, "sharded: bucket 7 of 32 (by object.metadata.namespace) is held by member replica-2, which reconciles it", true},
		{&introspect.ShardStatus{Bucket: 7, Buckets: byNS}, "is held by no live member yet", true},
		{&introspect.ShardStatus{Bucket: -1, Buckets: byUID, Serving: []int{1, 2}}, "not cached here, so its bucket cannot be told; this member serves buckets [1 2] of 32", true},
		{&introspect.ShardStatus{Bucket: 7, Buckets: byNS, State: "syncing"}, "is claimed here and still listing", false},
		{&introspect.ShardStatus{Bucket: 7, Buckets: byNS, State: "draining"}, "is being handed over", false},
	} {
		ks := introspect.KeyStatus{Controller: "c", Namespace: "ns", Name: "a", ControllerState: "running", Shard: tc.shard}
		lines, converged := ks.Explain(time.Now())
		if converged || !strings.Contains(lines[0], tc.want) || tc.alone != (len(lines) == 1) {
			t.Errorf("%+v explained as converged=%v: %q; want first %q (alone: %v)", tc.shard, converged, lines, tc.want, tc.alone)
		}
	}
	served := introspect.KeyStatus{Controller: "c", Namespace: "ns", Name: "a", ControllerState: "running",
		Shard: &introspect.ShardStatus{Bucket: 7, Buckets: byNS, State: "serving"}}
	if lines, _ := served.Explain(time.Now()); strings.Contains(strings.Join(lines, "\n"), "sharded") {
		t.Errorf("an object of a bucket served here explained with its shard: %q", lines)
	}
}

// An object of a kind no controller reconciles but one watches (Owns) is
// said to be watched by it, for the kind it reconciles.
func TestDebugSaysWhoWatchesAKindNoneReconciles(t *testing.T) {
	srv := fake.Start(t, fake.Options{})
	mgr := testenv.NewManager(t, srv.Config(), framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}})
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	if err := framework.NewBuilder[*corev1.ConfigMap](mgr, "parents", framework.ControllerOptions{}).Owns(&corev1.Secret{}).CompleteByKey(noop); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	testenv.Eventually(t, "metrics served", func() bool { return mgr.MetricsAddress() != "" })
	_, body := testenv.MetricsGet(t, mgr, introspect.Path+"api/object?kind=Secret&namespace=ns&name=s")
	st := decode[introspect.ObjectStatus](t, body)
	want := []introspect.Watcher{{Controller: "parents", Kind: introspect.Kind{Version: "v1", Kind: "ConfigMap"}}}
	if len(st.Controllers) != 0 || len(st.WatchedBy) != 1 || st.WatchedBy[0] != want[0] {
		t.Errorf("object status of a Secret: %s, want it watched by %+v", body, want)
	}
	_, body = testenv.MetricsGet(t, mgr, introspect.Path+"api/object?kind=Pod&namespace=ns&name=p")
	if st := decode[introspect.ObjectStatus](t, body); len(st.WatchedBy) != 0 {
		t.Errorf("object status of a Pod, which nothing watches: %s", body)
	}
}
