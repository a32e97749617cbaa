package informers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// splitGroup serves API group split.example.com, whose preferred
// version v2 (kind Metric) fails discovery while down is set and whose
// v1 (kind Thing) does not; asked counts the requests for the group.
func splitGroup(t *testing.T, down *atomic.Bool, asked *atomic.Int64) *httptest.Server {
	t.Helper()
	const group = "split.example.com"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		resources := func(version, kind, plural string) {
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"` + group + `/` + version + `","resources":[{"name":"` + plural + `","singularName":"x","namespaced":true,"kind":"` + kind + `","verbs":["get","list","watch"]}]}`))
		}
		switch r.URL.Path {
		case "/apis/" + group:
			asked.Add(1)
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
	t.Cleanup(srv.Close)
	return srv
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// splitMapper returns a mapper of a splitGroup server, on a fake clock at
// which it last reset discovery.
func splitMapper(t *testing.T, down *atomic.Bool, asked *atomic.Int64) (*RESTMapper, *fakeClock) {
	t.Helper()
	m, err := NewRESTMapper(&rest.Config{Host: splitGroup(t, down, asked).URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	m.now = clock.now
	m.lastReset = clock.now() // no Reset within the interval: only the partial group's own rediscovery
	return m, clock
}

// A group one of whose versions cannot be discovered (its aggregated API
// is down) still maps the kinds of its other versions; a kind it cannot
// find is a no-match that names the version that failed, and the group is
// discovered again once minResetInterval passed, so it is found once that
// version is back.
func TestAGroupWithAVersionDownMapsTheOthers(t *testing.T) {
	const group = "split.example.com"
	var down atomic.Bool
	var asked atomic.Int64
	down.Store(true)
	m, clock := splitMapper(t, &down, &asked) // no Reset within the interval: only the partial group's own rediscovery
	mapping, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Thing"})
	if err != nil || mapping.Resource.Resource != "things" {
		t.Fatalf("RESTMapping(Thing) with v2 down = %v, %v; want things", mapping, err)
	}
	_, err = m.RESTMapping(schema.GroupKind{Group: group, Kind: "Metric"})
	if !meta.IsNoMatchError(err) || !strings.Contains(err.Error(), group+"/v2") {
		t.Fatalf("RESTMapping(Metric) with v2 down = %v; want a no-match naming %s/v2", err, group)
	}
	down.Store(false)
	clock.step(minResetInterval)
	mapping, err = m.RESTMapping(schema.GroupKind{Group: group, Kind: "Metric"})
	if err != nil || mapping.Resource.Resource != "metrics" {
		t.Fatalf("RESTMapping(Metric) once v2 is back = %v, %v; want metrics", mapping, err)
	}
}

// While a version of a group is down, the lookups of the group's kinds
// within minResetInterval of its discovery share it: one request for N
// lookups, hits and misses alike, and a new one once the interval passed.
func TestAPartialGroupIsDiscoveredOncePerInterval(t *testing.T) {
	const group = "split.example.com"
	var down atomic.Bool
	var asked atomic.Int64
	down.Store(true)
	m, clock := splitMapper(t, &down, &asked)
	lookups := func() {
		for range 10 {
			if _, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Thing"}); err != nil {
				t.Fatalf("RESTMapping(Thing) with v2 down: %v", err)
			}
			if _, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Metric"}); !meta.IsNoMatchError(err) {
				t.Fatalf("RESTMapping(Metric) with v2 down = %v, want a no-match", err)
			}
		}
	}
	lookups()
	if n := asked.Load(); n != 1 {
		t.Errorf("20 lookups within the interval asked for the group %d times, want 1", n)
	}
	clock.step(minResetInterval - time.Nanosecond)
	lookups()
	if n := asked.Load(); n != 1 {
		t.Errorf("20 more lookups just before the interval ends asked for the group %d times in all, want 1", n)
	}
	clock.step(time.Nanosecond)
	lookups()
	if n := asked.Load(); n != 2 {
		t.Errorf("lookups once the interval passed asked for the group %d times in all, want 2", n)
	}

	// Adversarial: a group discovered whole is kept whatever the time.
	down.Store(false)
	clock.step(minResetInterval)
	if _, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Metric"}); err != nil {
		t.Fatal(err)
	}
	clock.step(time.Hour)
	for range 10 {
		if _, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: "Thing"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("lookups of a group discovered whole asked for it %d times in all, want 3", n)
	}
}
