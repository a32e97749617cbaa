package introspect_test

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/workqueue"
)

// clusterProvider serves a State of clusters and controllers only.
type clusterProvider struct{ state introspect.State }

func (p clusterProvider) State(now time.Time) introspect.State {
	s := p.state
	s.Time = now
	return s
}
func (clusterProvider) Controllers() []introspect.Controller { return nil }
func (clusterProvider) Informers() []informers.InformerStats { return nil }

func TestCountKeysAddsEachControllersKeysToTheirCluster(t *testing.T) {
	clusters := []introspect.ClusterStatus{
		{Name: "", State: "ready"},
		{Name: "edge-1", Source: "Secret fleet/b", State: "failed"}, // a duplicate
		{Name: "edge-1", Source: "Secret fleet/a", State: "ready"},
	}
	var local workqueue.Stats
	local.Normal.Depth, local.Replay.Depth = 2, 1
	controllers := []introspect.ControllerStatus{
		{Name: "local", Queue: local, InFlight: []introspect.InFlightKey{{Name: "x"}}},
		{Name: "fleet", Flows: []workqueue.FlowStats{{Flow: "", Queued: 1}, {Flow: "edge-1", Queued: 5, Held: 2}},
			InFlight: []introspect.InFlightKey{{Cluster: "edge-1", Name: "y"}, {Cluster: "edge-1", Name: "z"}}},
	}
	got := introspect.CountKeys(clusters, controllers)
	if got[0].Queued != 4 || got[0].Held != 1 {
		t.Errorf("own cluster: queued %d, held %d; want 4 (3 of the local controller's queue, 1 of the fleet's flow) and 1", got[0].Queued, got[0].Held)
	}
	if got[1].Queued != 0 || got[2].Queued != 5 || got[2].Held != 2 {
		t.Errorf("edge-1: %+v; want the engaged entry to have 5 queued and 2 held, the failed duplicate none", got[1:])
	}
}

func TestPageListsTheClusters(t *testing.T) {
	since := time.Now().Add(-time.Minute)
	state := introspect.State{Webhooks: []string{}, Clusters: []introspect.ClusterStatus{
		{Name: "", State: "ready", Since: since, Informers: 2, Objects: 10, Bytes: 20 << 10},
		{Name: "edge-1", Source: "Secret fleet/a", State: "unhealthy", Since: since, Error: "GET /readyz: connection refused", Queued: 7, Held: 1, Informers: 1, Objects: 3, Bytes: 3 << 20},
	}}
	srv := httptest.NewServer(introspect.Handler(clusterProvider{state}, logr.Discard()))
	defer srv.Close()
	page := get(t, srv, "")
	for _, re := range []string{
		`<tr class="cluster-row" data-cluster="" data-state="ready"><td><i>own</i></td>`,
		`<tr class="cluster-row" data-cluster="edge-1" data-state="unhealthy"><td>edge-1</td><td>Secret fleet/a</td><td><span class="bad">unhealthy</span> <span class="bad error">GET /readyz: connection refused</span></td><td>1m[0-9]+s</td><td class="num">7</td><td class="num">1</td><td class="num">1</td><td class="num">3</td><td class="num bytes">3.0 MiB</td>`,
	} {
		if !regexp.MustCompile(re).MatchString(page) {
			t.Errorf("the page lacks %s:\n%s", re, page)
		}
	}
	var got struct {
		Clusters []introspect.ClusterStatus `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(get(t, srv, "api/state")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Clusters) != 2 || got.Clusters[1].Name != "edge-1" || got.Clusters[1].Bytes != 3<<20 || got.Clusters[1].Queued != 7 {
		t.Errorf("JSON clusters %+v, want both, edge-1 with its bytes and queued keys", got.Clusters)
	}

	state.Clusters = state.Clusters[:1] // the manager's own cluster only: no table
	srv2 := httptest.NewServer(introspect.Handler(clusterProvider{state}, logr.Discard()))
	defer srv2.Close()
	if page := get(t, srv2, ""); regexp.MustCompile(`cluster-row`).MatchString(page) {
		t.Error("a manager of its own cluster only shows a clusters table")
	}
}
