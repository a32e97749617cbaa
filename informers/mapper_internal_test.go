package informers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// A group's discovery that a Reset overtakes is not kept: it may predate
// the CRD the Reset was for, and would hide it until the next Reset.
func TestADiscoveryOvertakenByAResetIsNotKept(t *testing.T) {
	const group = "late.example.com"
	var served atomic.Bool // the CRD is installed
	var m *RESTMapper
	resetDuringFirst := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/" + group:
			if !served.Load() {
				if resetDuringFirst {
					// The CRD is installed and someone resets while
					// this answer (the group is not served) is on its way.
					resetDuringFirst = false
					served.Store(true)
					m.Reset()
				}
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(`{"kind":"APIGroup","apiVersion":"v1","name":"` + group + `","versions":[{"groupVersion":"` + group + `/v1","version":"v1"}],"preferredVersion":{"groupVersion":"` + group + `/v1","version":"v1"}}`))
		case "/apis/" + group + "/v1":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"` + group + `/v1","resources":[{"name":"things","singularName":"thing","namespaced":true,"kind":"Thing","verbs":["get","list","watch"]}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	var err error
	if m, err = NewRESTMapper(&rest.Config{Host: srv.URL}, nil); err != nil {
		t.Fatal(err)
	}
	m.lastReset = time.Now() // a miss does not reset again within the second
	if _, err := m.group(group); err != nil {
		t.Fatal(err)
	}
	mapping, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Thing"})
	if err != nil || mapping.Resource.Resource != "things" {
		t.Fatalf("RESTMapping(Thing) after the Reset = %v, %v; want things", mapping, err)
	}
}

// A group one of whose versions cannot be discovered (its aggregated API
// is down) still maps the kinds of its other versions; a kind it cannot
// find is a no-match that names the version that failed, and the group is
// discovered again on the next lookup, so it is found once that version
// is back.
func TestAGroupWithAVersionDownMapsTheOthers(t *testing.T) {
	const group = "split.example.com"
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		resources := func(version, kind, plural string) {
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"` + group + `/` + version + `","resources":[{"name":"` + plural + `","singularName":"x","namespaced":true,"kind":"` + kind + `","verbs":["get","list","watch"]}]}`))
		}
		switch r.URL.Path {
		case "/apis/" + group:
			_, _ = w.Write([]byte(`{"kind":"APIGroup","apiVersion":"v1","name":"` + group + `","versions":[{"groupVersion":"` + group + `/v2","version":"v2"},{"groupVersion":"` + group + `/v1","version":"v1"}],"preferredVersion":{"groupVersion":"` + group + `/v2","version":"v2"}}`))
		case "/apis/" + group + "/v1":
			resources("v1", "Thing", "things")
		case "/apis/" + group + "/v2":
			if down.Load() {
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`, http.StatusServiceUnavailable)
				return
			}
			resources("v2", "Metric", "metrics")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	m, err := NewRESTMapper(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.lastReset = time.Now() // no Reset within the second: only the partial group's own rediscovery
	mapping, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Thing"})
	if err != nil || mapping.Resource.Resource != "things" {
		t.Fatalf("RESTMapping(Thing) with v2 down = %v, %v; want things", mapping, err)
	}
	_, err = m.RESTMapping(schema.GroupKind{Group: group, Kind: "Metric"})
	if !meta.IsNoMatchError(err) || !strings.Contains(err.Error(), group+"/v2") {
		t.Fatalf("RESTMapping(Metric) with v2 down = %v; want a no-match naming %s/v2", err, group)
	}
	down.Store(false)
	mapping, err = m.RESTMapping(schema.GroupKind{Group: group, Kind: "Metric"})
	if err != nil || mapping.Resource.Resource != "metrics" {
		t.Fatalf("RESTMapping(Metric) once v2 is back = %v, %v; want metrics", mapping, err)
	}
}
