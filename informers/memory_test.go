package informers_test

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/memsize"
	"github.com/converge-dev/converge/internal/testenv"
)

// createConfigMaps makes n ConfigMaps named cm-0… in ns, each with a
// payload of 1 KiB and a label shared by all, eight writers at a time.
func createConfigMaps(t *testing.T, cs kubernetes.Interface, ns string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				_, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i), Labels: map[string]string{"app": "memory"}},
					Data:       map[string]string{"payload": strings.Repeat(strconv.Itoa(i%10), 1024)},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// indexSlotBytes is the least an index costs per object: the key's string
// header in its value's set.
const indexSlotBytes = 16

func statsOf(c *informers.Cache, desc string) (informers.InformerStats, bool) {
	for _, st := range c.Stats() {
		if st.Description == desc {
			return st, true
		}
	}
	return informers.InformerStats{}, false
}

// An informer's Stats count its objects as they come and go, and estimate
// their bytes close to a walk of every object the informer holds.
func TestStatsCountAndSizeObjects(t *testing.T) { inBothForms(t, testStatsCountAndSizeObjects) }

func testStatsCountAndSizeObjects(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	const n = 500
	createConfigMaps(t, cs, ns, n)

	c := started(t, admin, informers.Options{Namespace: ns})
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := inf.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != n {
		t.Fatalf("listed %d ConfigMaps, want %d", len(objs), n)
	}
	var st informers.InformerStats
	eventually(t, "Stats counts every ConfigMap", func() bool {
		st, _ = statsOf(c, inf.String())
		return st.Objects == n
	})

	// Every object walked with one Sizer: the shared label map and
	// namespace count once, as the estimate counts them in SharedBytes.
	var sz memsize.Sizer
	var walked int64
	for _, o := range objs {
		walked += sz.Of(o)
	}
	est := st.Bytes + c.SharedBytes()
	// Decoded, the objects walked are those stored; compact, the store
	// holds their records, which the estimate counts exactly, and the
	// walk is of the objects decoded from them.
	lo, hi, perLo, perHi := 1.0, 1.3, int64(1024), int64(4096)
	if compactForm(t) {
		lo, hi, perLo, perHi = 0.1, 0.7, 128, 1024
	}
	if r := float64(est) / float64(walked); r < lo || r > hi {
		t.Errorf("estimate %d B (informer %d + shared %d) ÷ a walk of every object %d B = %.2f, want %v to %v (the store's map and index on top)",
			est, st.Bytes, c.SharedBytes(), walked, r, lo, hi)
	}
	if per := st.Bytes / n; per < perLo || per > perHi {
		t.Errorf("estimate of %d B per ConfigMap of 1 KiB, want %d to %d B", per, perLo, perHi)
	}
	if st.StartedByRead {
		t.Errorf("an informer made by For is flagged as started by a read: %+v", st)
	}

	// Stats may run while an index is added, and counts the index's
	// entries once it is.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			c.Stats()
		}
	}()
	if err := inf.AddIndex("label.app", func(cm *corev1.ConfigMap) []string { return []string{cm.Labels["app"]} }); err != nil {
		t.Fatal(err)
	}
	<-done
	indexed, _ := statsOf(c, inf.String())
	if added := indexed.Bytes - st.Bytes; added < n*indexSlotBytes {
		t.Errorf("an index of %d objects added %d B to the estimate, want at least %d B", n, added, n*indexSlotBytes)
	}
	st = indexed

	for i := range 10 {
		if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "cm-"+strconv.Itoa(i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "Stats counts the deletions", func() bool {
		st, _ = statsOf(c, inf.String())
		return st.Objects == n-10
	})

	// Stats costs about the same whatever the informers hold: it does not
	// list their keys (500 string headers, 8 KB, per informer and call).
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const calls = 100
	for range calls {
		c.Stats()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > 2048 {
		t.Errorf("Stats allocates %d B per call with %d objects cached, want under 2 KiB", per, n-10)
	}
}

// An informer counts its objects with its listeners: a handler of its own
// counts only while it has none, and the count stays right as listeners
// come and go.
func TestStatsCountWithTheListeners(t *testing.T) { inBothForms(t, testStatsCountWithTheListeners) }

func testStatsCountWithTheListeners(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	const n = 50
	createConfigMaps(t, cs, ns, n)

	c := started(t, admin, informers.Options{Namespace: ns})
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	count := func(want int, what string) {
		t.Helper()
		eventually(t, what, func() bool {
			st, _ := statsOf(c, inf.String())
			return st.Objects == want && inf.Len() == want
		})
	}
	if got := informers.CountsAlone(c, gk); !slices.Equal(got, []bool{true}) {
		t.Fatalf("an informer without listeners: counting alone %v, want [true]", got)
	}
	count(n, "the informer alone counts every ConfigMap")

	var a, b cache.ResourceEventHandlerRegistration
	if a, err = inf.AddListener(informers.ListenerFuncs[*corev1.ConfigMap]{}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err = inf.AddListener(informers.ListenerFuncs[*corev1.ConfigMap]{}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := informers.CountsAlone(c, gk); !slices.Equal(got, []bool{false}) {
		t.Errorf("an informer with listeners: counting alone %v, want [false] (its listeners count)", got)
	}
	count(n, "the listeners count every ConfigMap")
	if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	count(n-1, "the listeners count a deletion")
	if err := inf.RemoveListener(a); err != nil {
		t.Fatal(err)
	}
	count(n-1, "the listener left counts as the first did")
	if err := inf.RemoveListener(b); err != nil {
		t.Fatal(err)
	}
	if got := informers.CountsAlone(c, gk); !slices.Equal(got, []bool{true}) {
		t.Errorf("an informer whose listeners left: counting alone %v, want [true]", got)
	}
	count(n-1, "the informer alone counts again, from its cached objects")
}

// Total sums every informer whatever its kind, and agrees with the sum of
// ByKind's totals.
func TestTotalSumsEveryKind(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	sec := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	stats := []informers.InformerStats{
		{Kind: cm, Objects: 3, Bytes: 300},
		{Kind: cm, Objects: 2, Bytes: 200, StartedByRead: true},
		{Kind: sec, Objects: 1, Bytes: 1000},
	}
	got := informers.Total(stats)
	want := informers.KindStats{Informers: 3, StartedByRead: 1, Objects: 6, Bytes: 1500}
	if got != want {
		t.Fatalf("Total = %+v, want %+v", got, want)
	}
	var sum informers.KindStats
	for _, k := range informers.ByKind(stats) {
		sum.Informers, sum.StartedByRead, sum.Objects, sum.Bytes = sum.Informers+k.Informers, sum.StartedByRead+k.StartedByRead, sum.Objects+k.Objects, sum.Bytes+k.Bytes
	}
	if sum != want {
		t.Fatalf("ByKind sums to %+v, want %+v", sum, want)
	}
	if z := informers.Total(nil); z != (informers.KindStats{}) {
		t.Fatalf("Total(nil) = %+v, want zero", z)
	}
}
