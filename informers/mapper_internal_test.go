package informers

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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
