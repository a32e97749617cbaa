package report

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// Reads are the reads the driver's "reads <n>" measures, each the way the
// contender's own reconciler reads its cache (see SetReads).
type Reads struct {
	// Key names the i-th of the workload's n objects.
	Key func(i int) (namespace, name string)
	// Get reads one object by key into a value of its own, as a reconcile
	// would.
	Get func(ctx context.Context, namespace, name string) error
	// List reads every object of namespace and returns how many it read.
	List func(ctx context.Context, namespace string) (int, error)
}

var readsOf atomic.Pointer[Reads]

// SetReads makes r what "reads <n>" measures; until it is called, the
// answer is "Q err=no-reads".
func SetReads(r Reads) { readsOf.Store(&r) }

// The sizes of the reads measurement.
const (
	readGets       = 20000 // Gets of random keys
	readReconciles = 5000  // reconciles of four Gets each
	readLists      = 5     // Lists of the namespace; the median counts
)

// measureReads answers "reads <n>" with one line:
//
//	Q getP50=<µs> getP99=<µs> reconcileP50=<µs> reconcileP99=<µs> listMs=<ms> listed=<objects> err=<first error or ->
//
// Gets read random keys of the n objects; a reconcile reads one object
// and three others (its children); a List reads every object of the first
// key's namespace. The random keys are the same in every contender.
func measureReads(n int) string {
	reads := readsOf.Load()
	if reads == nil || n < 1 {
		return "Q err=no-reads"
	}
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(uint64(n), 47))
	var firstErr error
	get := func(i int) {
		ns, name := reads.Key(i)
		if err := reads.Get(ctx, ns, name); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("get %s/%s: %w", ns, name, err)
		}
	}
	gets := make([]time.Duration, readGets)
	for i := range gets {
		k := rnd.IntN(n)
		start := time.Now()
		get(k)
		gets[i] = time.Since(start)
	}
	recs := make([]time.Duration, readReconciles)
	for i := range recs {
		k, c1, c2, c3 := rnd.IntN(n), rnd.IntN(n), rnd.IntN(n), rnd.IntN(n)
		start := time.Now()
		get(k)
		get(c1)
		get(c2)
		get(c3)
		recs[i] = time.Since(start)
	}
	ns, _ := reads.Key(0)
	lists := make([]time.Duration, readLists)
	listed := 0
	for i := range lists {
		start := time.Now()
		got, err := reads.List(ctx, ns)
		lists[i] = time.Since(start)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("list %s: %w", ns, err)
		}
		listed = got
	}
	errText := "-"
	if firstErr != nil {
		errText = fmt.Sprintf("%q", firstErr.Error())
	}
	return fmt.Sprintf("Q getP50=%.3f getP99=%.3f reconcileP50=%.3f reconcileP99=%.3f listMs=%.3f listed=%d err=%s",
		micros(quantile(gets, 0.5)), micros(quantile(gets, 0.99)), micros(quantile(recs, 0.5)), micros(quantile(recs, 0.99)),
		float64(quantile(lists, 0.5))/float64(time.Millisecond), listed, errText)
}

// quantile returns the q-quantile of ds (nearest rank); it sorts ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
