package restset_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/converge-dev/converge/internal/restset"
)

var (
	core = schema.GroupVersion{Version: "v1"}
	apps = schema.GroupVersion{Group: "apps", Version: "v1"}
)

// A Set makes one client per group version and format, however many
// goroutines ask at once, with the codecs its creator gave for each.
func TestForMakesOneClientPerGroupVersionAndFormat(t *testing.T) {
	type asked struct {
		gv schema.GroupVersion
		f  restset.Format
	}
	var mu sync.Mutex
	var calls []asked
	base := serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion()
	set, err := restset.New(&rest.Config{Host: "https://127.0.0.1:1"}, nil, clientgoscheme.Scheme,
		func(gv schema.GroupVersion, f restset.Format) runtime.NegotiatedSerializer {
			mu.Lock()
			calls = append(calls, asked{gv, f})
			mu.Unlock()
			return base
		})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]*rest.RESTClient, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			rc, err := set.For(core, restset.JSON)
			if err != nil {
				t.Error(err)
			}
			got[i] = rc
		})
	}
	wg.Wait()
	for i, rc := range got {
		if rc == nil || rc != got[0] {
			t.Fatalf("caller %d got REST client %p, want the one client %p every caller shares", i, rc, got[0])
		}
	}
	proto, _ := set.For(core, restset.Protobuf)
	appsJSON, _ := set.For(apps, restset.JSON)
	if proto == got[0] || appsJSON == got[0] || proto == appsJSON {
		t.Error("another format or group version must get a client of its own")
	}
	if again, _ := set.For(core, restset.Protobuf); again != proto {
		t.Error("asking again for the protobuf client made a second one")
	}
	if n := set.Len(); n != 3 {
		t.Errorf("Len = %d, want 3 (core JSON, core protobuf, apps JSON)", n)
	}
	want := []asked{{core, restset.JSON}, {core, restset.Protobuf}, {apps, restset.JSON}}
	if len(calls) != len(want) {
		t.Fatalf("codecs asked for %v, want %v: once per client made", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("codecs call %d = %v, want %v", i, calls[i], want[i])
		}
	}
}

// A request whose context carries a failing fence never reaches the
// server, and its error wraps the fence's; requests without a fence, or
// with one that passes, go through the same client.
func TestFenceRefusesOnlyFencedRequests(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	set, err := restset.New(&rest.Config{Host: srv.URL}, nil, clientgoscheme.Scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := set.For(core, restset.JSON)
	if err != nil {
		t.Fatal(err)
	}
	errFenced := errors.New("fenced for the test")
	send := func(ctx context.Context) error {
		return rc.Post().Resource("configmaps").Namespace("default").Body([]byte(`{}`)).Do(ctx).Error()
	}

	if err := send(restset.WithFence(t.Context(), func() error { return errFenced })); !errors.Is(err, errFenced) {
		t.Errorf("fenced request = %v, want an error wrapping the fence's", err)
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("the server saw %d requests, want none while the fence fails", n)
	}
	if err := send(t.Context()); err != nil {
		t.Errorf("request without a fence: %v", err)
	}
	if err := send(restset.WithFence(t.Context(), func() error { return nil })); err != nil {
		t.Errorf("request whose fence passes: %v", err)
	}
	if n := served.Load(); n != 2 {
		t.Errorf("the server saw %d requests, want 2", n)
	}
}

// Every client of a Set draws on one client-side rate limit (QPS, Burst),
// as a clientset's clients do: a process-wide budget, not one per group
// version and format. A limiter of the configuration's own is kept.
func TestClientsShareOneRateLimit(t *testing.T) {
	set, err := restset.New(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10}, nil, clientgoscheme.Scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := set.For(core, restset.JSON)
	if err != nil {
		t.Fatal(err)
	}
	b, err := set.For(apps, restset.Protobuf)
	if err != nil {
		t.Fatal(err)
	}
	if a.GetRateLimiter() == nil || a.GetRateLimiter() != b.GetRateLimiter() {
		t.Errorf("rate limiters of core/v1 JSON and apps/v1 protobuf: %p and %p, want one, shared", a.GetRateLimiter(), b.GetRateLimiter())
	}
	if got := a.GetRateLimiter().QPS(); got != 5 {
		t.Errorf("shared limiter QPS = %v, want the configuration's 5", got)
	}

	own := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	set, err = restset.New(&rest.Config{Host: "https://127.0.0.1:1", RateLimiter: own}, nil, clientgoscheme.Scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := set.For(apps, restset.JSON); err != nil || c.GetRateLimiter() != own {
		t.Errorf("with a RateLimiter of the configuration's own: limiter %p (%v), want it", c.GetRateLimiter(), err)
	}
	set, err = restset.New(&rest.Config{Host: "https://127.0.0.1:1", QPS: -1}, nil, clientgoscheme.Scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := set.For(apps, restset.JSON); err != nil || c.GetRateLimiter() != nil {
		t.Errorf("with QPS -1: limiter %v (%v), want none", c.GetRateLimiter(), err)
	}
}
