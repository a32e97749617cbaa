package informers_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/sharding"
)

func TestBucketsOfAgreesWithSelector(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, field := range []sharding.Field{sharding.ByUID, sharding.ByNamespace} {
		for _, count := range []int{1, 3, 32, 7} {
			b := sharding.Buckets{By: field, Count: count}
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
			for n := range 2000 {
				v := string(uuid.NewUUID())
				if field == sharding.ByNamespace {
					v = fmt.Sprintf("ns-%d-%d", n, rng.IntN(1<<20))
				}
				obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: v, UID: types.UID(v)}}
				got := b.Of(v)
				if got != b.OfObject(obj) {
					t.Fatalf("%v: Of(%q) = %d, OfObject = %d", b, v, got, b.OfObject(obj))
				}
				for i := range count {
					ok, err := b.Selector(i).Matches(obj)
					if err != nil {
						t.Fatal(err)
					}
					if ok != (i == got) {
						t.Fatalf("%v: Of(%q) = %d, but Selector(%d) (%s) matches = %v", b, v, got, i, b.Selector(i), ok)
					}
				}
			}
		}
	}
	last := sharding.Buckets{By: sharding.ByUID, Count: 3}.Selector(2).Requirements()[0]
	if last.End != "0x10000000000000000" {
		t.Errorf("last bucket ends at %q, want 0x10000000000000000", last.End)
	}
}

func TestBucketsValidate(t *testing.T) {
	for _, tc := range []struct {
		b    sharding.Buckets
		want string
	}{
		{sharding.Buckets{By: sharding.ByUID, Count: 0}, "Buckets.Count 0"},
		{sharding.Buckets{By: sharding.ByUID, Count: 5000}, "Buckets.Count 5000"},
		{sharding.Buckets{By: "object.metadata.name", Count: 4}, `Buckets.By "object.metadata.name"`},
	} {
		err := tc.b.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.b, err, tc.want)
		}
	}
}

// events records the names a listener is told of, per event type.
type events struct {
	mu      sync.Mutex
	added   []string
	deleted []string
}

func (e *events) listen(t *testing.T, inf *informers.Informer[*corev1.ConfigMap]) {
	t.Helper()
	_, err := inf.AddListener(informers.ListenerFuncs[*corev1.ConfigMap]{
		AddFunc: func(cm *corev1.ConfigMap, _ bool) {
			e.mu.Lock()
			e.added = append(e.added, cm.Name)
			e.mu.Unlock()
		},
		DeleteFunc: func(cm *corev1.ConfigMap, _ bool) {
			e.mu.Lock()
			e.deleted = append(e.deleted, cm.Name)
			e.mu.Unlock()
		},
	}, cache.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *events) has(added bool, name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if added {
		return slices.Contains(e.added, name)
	}
	return slices.Contains(e.deleted, name)
}

// shardInformers creates one informer per bucket of b and waits for them.
func shardInformers(t *testing.T, c *informers.Cache, b sharding.Buckets) []*informers.Informer[*corev1.ConfigMap] {
	t.Helper()
	infs := make([]*informers.Informer[*corev1.ConfigMap], b.Count)
	for i := range infs { // all started before any syncs, as a ring's buckets are
		inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Shard: b.Selector(i)})
		if err != nil {
			t.Fatal(err)
		}
		infs[i] = inf
	}
	for _, inf := range infs {
		if err := inf.WaitForSync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return infs
}

// checkMembership fails t unless each informer holds exactly the objects
// of ns whose bucket is its own, by a direct list.
func checkMembership(t *testing.T, cs kubernetes.Interface, ns string, b sharding.Buckets, infs []*informers.Informer[*corev1.ConfigMap]) {
	t.Helper()
	live, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]string, b.Count)
	for _, cm := range live.Items {
		i := b.OfObject(&cm)
		want[i] = append(want[i], cm.Name)
	}
	total := 0
	for i, inf := range infs {
		got, err := inf.List(t.Context(), informers.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, 0, len(got))
		for _, cm := range got {
			names = append(names, cm.Name)
		}
		slices.Sort(names)
		slices.Sort(want[i])
		if !slices.Equal(names, want[i]) {
			t.Errorf("bucket %d holds %v, want %v", i, names, want[i])
		}
		total += len(names)
	}
	if total != len(live.Items) {
		t.Errorf("buckets hold %d objects together, want all %d", total, len(live.Items))
	}
}

func serverSharded(t *testing.T, c *informers.Cache) (sharded, plain int) {
	t.Helper()
	for _, s := range c.Stats() {
		if !strings.Contains(s.Description, " in shard ") {
			continue
		}
		if s.ServerSharded {
			sharded++
		} else {
			plain++
		}
	}
	return sharded, plain
}

func shardMembership(t *testing.T, cfg *rest.Config, wantServer bool) {
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := testenv.Namespace(t, cs)
	for i := range 60 {
		testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%02d", i), nil)
	}
	// Count the lists and watches of the ConfigMaps, but for the probe
	// (limit=1): filtered by the server, each bucket's informer makes its
	// own; filtered by the cache, they share one watch.
	var lists, watches, probes atomic.Int64
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/configmaps") && q.Get("limit") == "1" && q.Has("shardSelector") {
				probes.Add(1)
			}
			if strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/configmaps") && q.Get("limit") != "1" {
				if q.Get("watch") == "true" {
					watches.Add(1)
				} else {
					lists.Add(1)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	c := started(t, counted, informers.Options{Namespace: ns})
	b := sharding.Buckets{By: sharding.ByUID, Count: 4}
	infs := shardInformers(t, c, b)
	checkMembership(t, cs, ns, b, infs)
	if n := probes.Load(); n != 1 {
		t.Errorf("%d informers of buckets started at once asked %d times whether the server applies shard selectors, want once", len(infs), n)
	}
	if sharded, plain := serverSharded(t, c); wantServer && sharded != 4 || !wantServer && plain != 4 {
		t.Errorf("%d informers filtered by the server and %d by the cache, want all 4 by the server = %v", sharded, plain, wantServer)
	}

	evs := make([]*events, len(infs))
	for i, inf := range infs {
		evs[i] = &events{}
		evs[i].listen(t, inf)
	}
	late := testenv.CreateConfigMap(t, cs, ns, "late", nil)
	home := b.OfObject(late)
	eventually(t, "the late object reaches its bucket", func() bool { return evs[home].has(true, "late") })
	victim := "cm-07"
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vhome := b.OfObject(cm)
	if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion reaches its bucket", func() bool { return evs[vhome].has(false, victim) })
	// A marker created after both, in every bucket's view once each has
	// seen a later event: create one object per bucket and wait for each.
	for i := range infs {
		for n := 0; ; n++ {
			name := fmt.Sprintf("mark-%d-%d", i, n)
			m := testenv.CreateConfigMap(t, cs, ns, name, nil)
			if b.OfObject(m) == i {
				eventually(t, "marker reaches bucket", func() bool { return evs[i].has(true, name) })
				break
			}
		}
	}
	for i, ev := range evs {
		if i != home && ev.has(true, "late") {
			t.Errorf("bucket %d was told of late, whose bucket is %d", i, home)
		}
		if i != vhome && ev.has(false, victim) {
			t.Errorf("bucket %d was told of the deletion of %s, whose bucket is %d", i, victim, vhome)
		}
	}
	checkMembership(t, cs, ns, b, infs)
	want := int64(1)
	if wantServer {
		want = int64(len(infs))
	}
	if n := watches.Load(); n != want {
		t.Errorf("%d informers of buckets made %d watches, want %d", len(infs), n, want)
	}
	t.Logf("%d informers of buckets made %d lists and %d watches", len(infs), lists.Load(), watches.Load())
}

func TestShardsFilteredByTheCacheWhenTheServerIgnoresThem(t *testing.T) {
	shardMembership(t, plane.Config(t), false)
}

func TestShardsFilteredByTheServerWithTheFeatureGate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane; skipped with -short")
	}
	env := envtest.New(envtest.Options{APIServerFlags: []string{"--feature-gates=ShardedListAndWatch=true"}})
	cfg, err := env.Start(t.Context())
	if err != nil {
		t.Fatalf("start control plane with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	shardMembership(t, cfg, true)
}

func TestShardReads(t *testing.T) { inBothForms(t, testShardReads) }

func testShardReads(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)

	t.Run("by uid", func(t *testing.T) {
		ns := testenv.Namespace(t, cs)
		b := sharding.Buckets{By: sharding.ByUID, Count: 4}
		byBucket := map[int][]string{}
		for i := range 40 {
			cm := testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%02d", i), nil)
			byBucket[b.OfObject(cm)] = append(byBucket[b.OfObject(cm)], cm.Name)
		}
		c := started(t, admin, informers.Options{Namespace: ns})
		held := []int{0, 2}
		if err := hooks.RouteReads(c, &corev1.ConfigMap{}, informers.Selection{}, b, func() []int { return held }); err != nil {
			t.Fatal(err)
		}
		for _, i := range held {
			if _, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Shard: b.Selector(i)}); err != nil {
				t.Fatal(err)
			}
		}
		var cm corev1.ConfigMap
		if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: byBucket[2][0]}, &cm); err != nil {
			t.Errorf("Get in a held bucket: %v", err)
		}
		err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: byBucket[1][0]}, &cm)
		if !errors.Is(err, informers.ErrNotCached) || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "[0 2]") ||
			!strings.Contains(err.Error(), byBucket[1][0]) || !strings.Contains(err.Error(), "bucket 1") {
			t.Errorf("Get in an unheld bucket = %v, want ErrNotCached naming the object, its bucket and the held buckets", err)
		}
		if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "no-such"}, &cm); !apierrors.IsNotFound(err) {
			t.Errorf("Get of an object nobody has = %v, want NotFound", err)
		}
		var list corev1.ConfigMapList
		if err := c.List(t.Context(), &list); err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, cm := range list.Items {
			got = append(got, cm.Name)
		}
		want = append(slices.Clone(byBucket[0]), byBucket[2]...)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("List = %v, want the held buckets' %v", got, want)
		}
		for _, s := range c.Stats() {
			if !strings.Contains(s.Description, " in shard ") {
				t.Errorf("cache made an informer %q outside the buckets", s.Description)
			}
		}
	})

	t.Run("by namespace", func(t *testing.T) {
		b := sharding.Buckets{By: sharding.ByNamespace, Count: 3}
		nsOf := map[int]string{}
		for n := 0; len(nsOf) < 3; n++ {
			ns := testenv.Namespace(t, cs, fmt.Sprint(n))
			if _, ok := nsOf[b.Of(ns)]; !ok {
				nsOf[b.Of(ns)] = ns
				testenv.CreateConfigMap(t, cs, ns, "a", nil)
			}
		}
		c := started(t, admin, informers.Options{})
		if err := hooks.RouteReads(c, &corev1.ConfigMap{}, informers.Selection{}, b, func() []int { return []int{1} }); err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		err := c.Get(t.Context(), types.NamespacedName{Namespace: nsOf[1], Name: "a"}, &cm)
		if !errors.Is(err, informers.ErrNotCached) || !strings.Contains(err.Error(), "no informer") {
			t.Errorf("Get before the bucket's informer exists = %v, want ErrNotCached", err)
		}
		if _, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Shard: b.Selector(1)}); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(t.Context(), types.NamespacedName{Namespace: nsOf[1], Name: "a"}, &cm); err != nil {
			t.Errorf("Get in the held bucket: %v", err)
		}
		err = c.Get(t.Context(), types.NamespacedName{Namespace: nsOf[0], Name: "a"}, &cm)
		if !errors.Is(err, informers.ErrNotCached) || !strings.Contains(err.Error(), "[1]") || !strings.Contains(err.Error(), nsOf[0]) {
			t.Errorf("Get in an unheld bucket = %v, want ErrNotCached naming the namespace and the held buckets", err)
		}
		var list corev1.ConfigMapList
		if err := c.List(t.Context(), &list, informers.InNamespace(nsOf[2])); !errors.Is(err, informers.ErrNotCached) {
			t.Errorf("List in an unheld namespace = %v, want ErrNotCached", err)
		}
		if err := c.List(t.Context(), &list, informers.InNamespace(nsOf[1])); err != nil || len(list.Items) != 1 {
			t.Errorf("List in the held namespace = %d items, %v; want 1", len(list.Items), err)
		}
		if n := len(c.Stats()); n != 1 {
			t.Errorf("cache has %d informers, want only the held bucket's: %v", n, c.Stats())
		}
	})

	t.Run("validation", func(t *testing.T) {
		c, err := informers.New(admin, informers.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := hooks.RouteReads(c, &corev1.ConfigMap{}, informers.Selection{}, sharding.Buckets{By: sharding.ByUID}, func() []int { return nil }); err == nil {
			t.Error("routeReads with Count 0 succeeded")
		}
		if err := hooks.RouteReads(c, &corev1.ConfigMap{}, informers.Selection{}, sharding.Buckets{By: sharding.ByUID, Count: 2}, nil); err == nil {
			t.Error("routeReads with a nil held succeeded")
		}
	})
}

func TestShards(t *testing.T) { inBothForms(t, testShards) }

func testShards(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	kind := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	b := sharding.Buckets{By: sharding.ByUID, Count: 4}
	byBucket := map[int][]string{}
	for i := 0; i < 24 || len(byBucket[0]) == 0; i++ { // UIDs are random: bucket 0 must get one
		cm := testenv.CreateConfigMap(t, cs, ns, fmt.Sprintf("cm-%02d", i), nil)
		byBucket[b.OfObject(cm)] = append(byBucket[b.OfObject(cm)], cm.Name)
	}
	c := started(t, admin, informers.Options{Namespace: ns})
	held := map[int]*informers.Informer[*corev1.ConfigMap]{}
	for _, i := range []int{1, 3} {
		inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{Shard: b.Selector(i)})
		if err != nil {
			t.Fatal(err)
		}
		held[i] = inf
	}
	s, err := newBucketReader(kind, b, func() map[int]*informers.Informer[*corev1.ConfigMap] { return held })
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 3} {
		for _, name := range byBucket[i] {
			key := types.NamespacedName{Namespace: ns, Name: name}
			if cm, err := s.Get(t.Context(), key); err != nil || cm.Name != name {
				t.Errorf("Get %s of held bucket %d = %v, %v", name, i, cm, err)
			}
			if got, ok := s.BucketOf(key); !ok || got != i {
				t.Errorf("BucketOf %s = %d, %v; want %d", name, got, ok, i)
			}
		}
	}
	other := types.NamespacedName{Namespace: ns, Name: byBucket[0][0]}
	if _, err := s.Get(t.Context(), other); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "[1 3]") {
		t.Errorf("Get of an unheld bucket's object = %v, want a NotFound naming the held buckets", err)
	}
	if _, ok := s.BucketOf(other); ok {
		t.Errorf("BucketOf an unheld bucket's object is known")
	}
	objs, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Name)
	}
	want := append(slices.Clone(byBucket[1]), byBucket[3]...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("List = %v, want the held buckets' %v", got, want)
	}

	held[2] = nil // held, without an informer yet: it holds nothing to list
	if _, err := s.List(t.Context()); !errors.Is(err, informers.ErrNotCached) || !strings.Contains(err.Error(), "bucket 2") {
		t.Errorf("List with a held bucket without informer = %v, want ErrNotCached naming bucket 2", err)
	}
	held[7] = nil
	if _, err := s.Get(t.Context(), other); err == nil || !strings.Contains(err.Error(), "bucket 7") {
		t.Errorf("Get with held bucket 7 of 4 = %v, want an error naming it", err)
	}

	none, err := newBucketReader(kind, b, func() map[int]*informers.Informer[*corev1.ConfigMap] { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Get(t.Context(), other); !errors.Is(err, informers.ErrNotCached) || apierrors.IsNotFound(err) {
		t.Errorf("Get while no bucket is held = %v, want ErrNotCached, not NotFound", err)
	}

	for name, mk := range map[string]func() error{
		"no kind": func() error {
			_, err := newBucketReader(schema.GroupVersionKind{}, b, func() map[int]*informers.Informer[*corev1.ConfigMap] { return nil })
			return err
		},
		"no count": func() error {
			_, err := newBucketReader(kind, sharding.Buckets{By: sharding.ByUID}, func() map[int]*informers.Informer[*corev1.ConfigMap] { return nil })
			return err
		},
		"nil held": func() error {
			_, err := newBucketReader(kind, b, nil)
			return err
		},
		"held of another type": func() error {
			_, err := hooks.NewBucketReader[bucketReader]((*informers.Informer[*corev1.ConfigMap])(nil), kind, b, func() map[int]*informers.Informer[*corev1.Secret] { return nil })
			return err
		},
		"a reader of another type": func() error {
			_, err := hooks.NewBucketReader[informers.Reader[*corev1.Secret]]((*informers.Informer[*corev1.ConfigMap])(nil), kind, b, func() map[int]*informers.Informer[*corev1.ConfigMap] { return nil })
			return err
		},
	} {
		if err := mk(); err == nil {
			t.Errorf("NewBucketReader with %s succeeded", name)
		}
	}
}

func TestInformerStop(t *testing.T) { inBothForms(t, testInformerStop) }

func testInformerStop(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	c := started(t, admin, informers.Options{Namespace: ns})
	old, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	var oldEvents events
	oldEvents.listen(t, old)
	old.Stop()
	if n := len(c.Stats()); n != 0 {
		t.Errorf("Stats after Stop lists %d informers: %v", n, c.Stats())
	}
	if _, err := old.List(t.Context()); !errors.Is(err, informers.ErrStopped) {
		t.Errorf("List after Stop = %v, want ErrStopped", err)
	}
	fresh, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if fresh == old || fresh.String() != old.String() {
		t.Fatalf("For after Stop = %v, want a new informer of the same selection", fresh)
	}
	var freshEvents events
	freshEvents.listen(t, fresh)
	testenv.CreateConfigMap(t, cs, ns, "after", nil)
	eventually(t, "the new informer sees the object", func() bool { return freshEvents.has(true, "after") })
	if oldEvents.has(true, "after") {
		t.Error("the stopped informer's listener was told of an object created after Stop")
	}
	if len(c.Stats()) != 1 {
		t.Errorf("Stats = %v, want the new informer only", c.Stats())
	}
}

// bucketReader is the reader hooks.NewBucketReader makes, as the framework
// uses it.
type bucketReader interface {
	informers.Reader[*corev1.ConfigMap]
	BucketOf(key types.NamespacedName) (int, bool)
}

func newBucketReader(kind schema.GroupVersionKind, b sharding.Buckets, held func() map[int]*informers.Informer[*corev1.ConfigMap]) (bucketReader, error) {
	return hooks.NewBucketReader[bucketReader]((*informers.Informer[*corev1.ConfigMap])(nil), kind, b, held)
}
