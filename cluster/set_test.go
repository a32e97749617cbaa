package cluster_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/informers"
)

// newSet returns a Set whose own cluster is a fake API server, running
// until the test ends, and the listener that records what it hears.
func newSet(t *testing.T, opts cluster.Options) (*cluster.Set, *recorder) {
	t.Helper()
	local, err := cluster.New(cluster.Target{Config: fake.Start(t, fake.Options{}).Config()}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cluster.NewSet(local, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s.Subscribe(rec)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, rec
}

// recorder is a listener that records what it hears, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Engaged(c *cluster.Cluster)    { r.add("+" + c.Name()) }
func (r *recorder) Disengaged(c *cluster.Cluster) { r.add("-" + c.Name()) }
func (r *recorder) add(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, " ")
}

// eventually polls cond every 10 ms for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

func health(s *cluster.Set, source string) (cluster.Health, bool) {
	for _, h := range s.Health() {
		if h.Source == source {
			return h, true
		}
	}
	return cluster.Health{}, false
}

func TestEngageRefusesInvalidTargets(t *testing.T) {
	s, _ := newSet(t, cluster.Options{})
	cfg := fake.Start(t, fake.Options{}).Config()
	for _, tc := range []struct {
		target cluster.Target
		want   string
	}{
		{cluster.Target{Name: "Edge_1", Config: cfg, Source: "Secret fleet/edge"}, `cluster "Edge_1" (from Secret fleet/edge): invalid target: Name "Edge_1" is not a DNS-1123 label`},
		{cluster.Target{Name: "edge-1"}, `cluster "edge-1": invalid target: Config is nil`},
		{cluster.Target{Name: "", Config: cfg, Source: "Secret fleet/local"}, `Secret fleet/local engages the name "", which is the manager's own cluster's`},
	} {
		err := s.Engage(tc.target)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Engage(%+v) = %v, want an error containing %q", tc.target, err, tc.want)
		}
	}
}

func TestEngageRefusesANameAnotherSourceEngaged(t *testing.T) {
	s, rec := newSet(t, cluster.Options{})
	cfg := fake.Start(t, fake.Options{}).Config()
	if err := s.Engage(cluster.Target{Name: "edge-1", Config: cfg, Source: "Secret fleet/a"}); err != nil {
		t.Fatal(err)
	}
	err := s.Engage(cluster.Target{Name: "edge-1", Config: fake.Start(t, fake.Options{}).Config(), Source: "Secret fleet/b"})
	if !errors.Is(err, cluster.ErrDuplicate) || !strings.Contains(err.Error(), "Secret fleet/a") || !strings.Contains(err.Error(), "Secret fleet/b") {
		t.Fatalf("Engage of a duplicate name = %v, want ErrDuplicate naming both Secrets", err)
	}
	if h, ok := health(s, "Secret fleet/b"); !ok || h.State != cluster.StateFailed || !strings.Contains(h.Err, "Secret fleet/a") {
		t.Errorf("Health of the duplicate: %+v, %v; want failed, naming the first source", h, ok)
	}
	eventually(t, "the first source's cluster is engaged", func() bool { return rec.String() == "+ +edge-1" })
	c, err := s.Get("edge-1")
	if err != nil || c.Target().Source != "Secret fleet/a" {
		t.Errorf("Get(edge-1) = %v, %v; want the first source's", c, err)
	}
}

func TestEngageNeverWaitsOnAnUnreachableCluster(t *testing.T) {
	// One slot: the unreachable cluster takes it first, fails its probe,
	// and retries with its backoff; the good one is engaged meanwhile.
	s, rec := newSet(t, cluster.Options{MaxEngaging: 1, Health: cluster.HealthOptions{Timeout: time.Second}})
	dead := &rest.Config{Host: "https://127.0.0.1:1"}
	start := time.Now()
	if err := s.Engage(cluster.Target{Name: "dead", Config: dead}); err != nil {
		t.Fatal(err)
	}
	if err := s.Engage(cluster.Target{Name: "edge-1", Config: fake.Start(t, fake.Options{}).Config()}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Engage took %v: it must return at once", took)
	}
	eventually(t, "edge-1 is engaged", func() bool { return strings.Contains(rec.String(), "+edge-1") })
	eventually(t, "dead is reported failed", func() bool {
		h, ok := health(s, "dead")
		return ok && h.State == cluster.StateFailed && strings.Contains(h.Err, "127.0.0.1:1")
	})
	if _, err := s.Get("dead"); !errors.Is(err, cluster.ErrNotEngaged) {
		t.Errorf("Get(dead) = %v, want ErrNotEngaged", err)
	}
	s.Disengage("dead")
	if _, ok := health(s, "dead"); ok {
		t.Error("a disengaged target is still in Health")
	}
}

func TestReengagingANewVersionReplacesTheConnection(t *testing.T) {
	s, rec := newSet(t, cluster.Options{})
	cfg := fake.Start(t, fake.Options{}).Config()
	target := cluster.Target{Name: "edge-1", Config: cfg, Version: "1"}
	if err := s.Engage(target); err != nil {
		t.Fatal(err)
	}
	eventually(t, "edge-1 is engaged", func() bool { return rec.String() == "+ +edge-1" })
	first, _ := s.Get("edge-1")
	if err := s.Engage(target); err != nil { // same version: nothing
		t.Fatal(err)
	}
	target.Version = "2"
	if err := s.Engage(target); err != nil {
		t.Fatal(err)
	}
	eventually(t, "edge-1 is engaged anew", func() bool { return rec.String() == "+ +edge-1 -edge-1 +edge-1" })
	second, _ := s.Get("edge-1")
	if second == first {
		t.Fatal("the new version did not replace the connection")
	}
	if first.Context().Err() == nil {
		t.Error("the replaced connection's context did not end")
	}
	s.Disengage("edge-1")
	if got := rec.String(); got != "+ +edge-1 -edge-1 +edge-1 -edge-1" {
		t.Errorf("listener heard %q", got)
	}
	if second.Health().State != cluster.StateDisengaged {
		t.Errorf("Health after Disengage: %+v", second.Health())
	}
}

func TestFailIsReportedOnceUntilTheNameIsDisengaged(t *testing.T) {
	s, _ := newSet(t, cluster.Options{})
	err := errors.New("Secret fleet/a: data.kubeconfig: no cluster")
	s.Fail("a", "Secret fleet/a", err)
	s.Fail("a", "Secret fleet/a", err)
	if h, ok := health(s, "Secret fleet/a"); !ok || h.Err != err.Error() {
		t.Fatalf("Health: %+v, %v", h, ok)
	}
	s.Disengage("a")
	if _, ok := health(s, "Secret fleet/a"); ok {
		t.Error("a disengaged name's failure is still in Health")
	}
}

// blockingReadyz holds each /readyz probe until release is closed,
// counting the probes in flight and the most at once.
type blockingReadyz struct {
	next    http.RoundTripper
	release chan struct{}
	mu      *sync.Mutex
	now     *int
	most    *int
}

func (b blockingReadyz) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != "/readyz" {
		return b.next.RoundTrip(r)
	}
	b.mu.Lock()
	*b.now++
	*b.most = max(*b.most, *b.now)
	b.mu.Unlock()
	<-b.release
	b.mu.Lock()
	*b.now--
	b.mu.Unlock()
	return b.next.RoundTrip(r)
}

func TestAtMostMaxEngagingClustersConnectAtOnce(t *testing.T) {
	s, rec := newSet(t, cluster.Options{MaxEngaging: 2, Health: cluster.HealthOptions{Interval: -1}})
	var mu sync.Mutex
	var now, most int
	release := make(chan struct{})
	for _, name := range []string{"a", "b", "c"} {
		cfg := fake.Start(t, fake.Options{}).Config()
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return blockingReadyz{next: rt, release: release, mu: &mu, now: &now, most: &most}
		}
		if err := s.Engage(cluster.Target{Name: name, Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "two probes are in flight", func() bool { mu.Lock(); defer mu.Unlock(); return now >= 2 })
	close(release)
	eventually(t, "all three are engaged", func() bool { return len(s.Names()) == 4 })
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Errorf("at most %d probes were in flight at once, want MaxEngaging (2)", most)
	}
	if got := strings.Count(rec.String(), "+"); got != 4 {
		t.Errorf("listener heard %q", rec.String())
	}
}

func TestStatsCountTheCacheOfEachEngagedCluster(t *testing.T) {
	s, rec := newSet(t, cluster.Options{})
	srv := fake.Start(t, fake.Options{})
	kube := kubernetes.NewForConfigOrDie(srv.Config())
	for _, name := range []string{"a", "b", "c"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string]string{"k": strings.Repeat("v", 1000)}}
		if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Engage(cluster.Target{Name: "edge-1", Config: srv.Config()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Engage(cluster.Target{Name: "edge-1", Config: srv.Config(), Source: "another"}); !errors.Is(err, cluster.ErrDuplicate) {
		t.Fatalf("duplicate Engage = %v, want ErrDuplicate", err)
	}
	eventually(t, "edge-1 is engaged", func() bool { return strings.Contains(rec.String(), "+edge-1") })
	c, err := s.Get("edge-1")
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.ConfigMapList // starts the cluster's ConfigMap informer
	if err := c.Cache().List(t.Context(), &list); err != nil || len(list.Items) != 3 {
		t.Fatalf("List = %d items, %v; want 3", len(list.Items), err)
	}
	var engaged, failed []cluster.Stats
	for _, st := range s.Stats() {
		switch {
		case st.Cluster == "edge-1" && st.State == cluster.StateReady:
			engaged = append(engaged, st)
		case st.Cluster == "edge-1":
			failed = append(failed, st)
		}
	}
	if len(engaged) != 1 || engaged[0].Informers != 1 || engaged[0].Objects != 3 || engaged[0].Bytes < 3000 {
		t.Errorf("Stats of edge-1 = %+v; want one ready entry with 1 informer, 3 objects, at least their 3000 data bytes", engaged)
	}
	if len(failed) != 1 || failed[0].Informers != 0 || failed[0].Objects != 0 || failed[0].Bytes != 0 {
		t.Errorf("Stats of the duplicate = %+v; want one entry with no cache", failed)
	}
}
