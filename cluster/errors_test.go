package cluster_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/fake"
)

// logLines is a logger's lines, for a test to read.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	l.lines = append(l.lines, args)
	l.mu.Unlock()
}

// matching returns the lines holding every one of subs.
func (l *logLines) matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// A second source engaging a name another engaged is logged, once, with
// the cluster's name and both sources: it was only in Health.
func TestADuplicateNameIsLoggedOnce(t *testing.T) {
	logs := &logLines{}
	s, rec := newSet(t, cluster.Options{Logger: funcr.New(logs.add, funcr.Options{})})
	cfg := fake.Start(t, fake.Options{}).Config()
	if err := s.Engage(cluster.Target{Name: "edge-1", Config: cfg, Source: "Namespace edge-1"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Engage(cluster.Target{Name: "edge-1", Config: cfg, Source: "Secret fleet/edge-1"}); !errors.Is(err, cluster.ErrDuplicate) {
			t.Fatalf("duplicate Engage = %v, want ErrDuplicate", err)
		}
	}
	eventually(t, "edge-1 is engaged", func() bool { return strings.Contains(rec.String(), "+edge-1") })
	got := logs.matching(`"cannot engage cluster"`, `"cluster"="edge-1"`, `"source"="Secret fleet/edge-1"`, "Namespace edge-1 engaged it first")
	if len(got) != 1 {
		t.Errorf("the duplicate was logged %d times, want once: %q", len(got), logs.matching("edge-1"))
	}
}

// Each error of a member cluster's client and API reader names the
// cluster, and wraps the cause: a miss stays NotFound, a write after
// disengagement stays ErrDisengaged. The manager's own cluster's errors
// name none.
func TestAMemberClustersErrorsNameIt(t *testing.T) {
	s, rec := newSet(t, cluster.Options{})
	if err := s.Engage(cluster.Target{Name: "edge-1", Config: fake.Start(t, fake.Options{}).Config()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "edge-1 is engaged", func() bool { return strings.Contains(rec.String(), "+edge-1") })
	c, err := s.Get("edge-1")
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "default", Name: "missing"}
	for what, err := range map[string]error{
		"Client.Get":    c.Client().Get(t.Context(), key, &corev1.ConfigMap{}),
		"APIReader.Get": c.APIReader().Get(t.Context(), key, &corev1.ConfigMap{}),
		"Client.Delete": c.Client().Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "missing"}}),
	} {
		if !apierrors.IsNotFound(err) || !strings.HasPrefix(err.Error(), "cluster edge-1: ") {
			t.Errorf("%s of a missing object in edge-1 = %v; want NotFound, starting with \"cluster edge-1: \"", what, err)
		}
	}
	local := s.Local().APIReader().Get(t.Context(), key, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(local) || strings.Contains(local.Error(), "cluster") {
		t.Errorf("APIReader.Get of the manager's own cluster = %v; want NotFound naming no cluster", local)
	}
	s.Disengage("edge-1")
	err = c.Client().Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "late"}})
	if !errors.Is(err, cluster.ErrDisengaged) || !strings.HasPrefix(err.Error(), "cluster edge-1: create ConfigMap default/late: ") {
		t.Errorf("a write after disengagement = %v; want ErrDisengaged, starting with \"cluster edge-1: create ConfigMap default/late: \"", err)
	}
}

// cleaner deletes ConfigMap default/copy in each cluster it hears
// disengaged, and records the error.
type cleaner struct{ errs chan error }

func (cleaner) Engaged(*cluster.Cluster) {}
func (l cleaner) Disengaged(c *cluster.Cluster) {
	l.errs <- c.Client().Delete(c.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "copy"}})
}

// A Listener's Disengaged runs before the cluster's client is fenced: it
// can clean up there; a write after it is refused.
func TestDisengagedCleansUpBeforeTheFence(t *testing.T) {
	s, rec := newSet(t, cluster.Options{})
	srv := fake.Start(t, fake.Options{})
	if err := s.Engage(cluster.Target{Name: "edge-1", Config: srv.Config()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "edge-1 is engaged", func() bool { return strings.Contains(rec.String(), "+edge-1") })
	c, _ := s.Get("edge-1")
	if err := c.Client().Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "copy"}}); err != nil {
		t.Fatal(err)
	}
	l := cleaner{errs: make(chan error, 1)}
	s.Subscribe(l)
	s.Disengage("edge-1")
	if err := <-l.errs; err != nil {
		t.Errorf("Disengaged's cleanup: %v, want the copy deleted", err)
	}
	if err := c.APIReader().Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "copy"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the copy after cleanup: %v, want NotFound", err)
	}
	if err := c.Client().Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}}); !errors.Is(err, cluster.ErrDisengaged) {
		t.Errorf("a write after Disengaged: %v, want ErrDisengaged", err)
	}
}
