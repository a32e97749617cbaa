package informers

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/converge-dev/converge/sharding"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

// Read-your-own-writes: the client tells the cache about each write it
// makes (ObserveWrite, ObserveDeletion); a later Get of that object, or List
// that could show it, waits, bounded, until the cache holds that write or
// something newer. A reconcile that follows its own write therefore never
// acts on the state before it: no duplicate creates, no conflict loops.

// writeKey names one object across informer modes and selections.
type writeKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// writeMark is the newest write this process made to one object. Marks are
// never modified once stored: they are replaced, and compared by address.
type writeMark struct {
	rv     uint64            // resource version the server answered; 0 with gone
	gone   bool              // the object was deleted outright
	uid    string            // the object's UID, if known
	labels map[string]string // without gone: the object's labels as written
	at     time.Time
}

const (
	defaultReadYourWritesTimeout = 10 * time.Second
	// maxMarks bounds the marks kept for objects never read back.
	maxMarks = 8192
	markTTL  = time.Minute
)

// ObserveWrite records that this process wrote obj and the server answered
// with obj (its resourceVersion and labels as stored). Writers call it;
// readers then wait for the cache to catch up (see Reader). Resource
// versions that are not numbers are ignored.
func (c *Cache) ObserveWrite(gvk schema.GroupVersionKind, obj metav1.Object) {
	n, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil || c.opts.ReadYourWritesTimeout < 0 {
		return
	}
	c.mark(writeKey{gvk.GroupKind(), obj.GetNamespace(), obj.GetName()}, &writeMark{rv: n, uid: string(obj.GetUID()), labels: obj.GetLabels(), at: time.Now()})
}

// ObserveDeletion records that this process deleted obj and the server
// removed it at once (no finalizers held it). obj names the object; its UID,
// when set, tells it from an object re-created under the same name, which
// reads then take as fresh. Reads wait until the cache no longer holds the
// deleted object.
func (c *Cache) ObserveDeletion(gvk schema.GroupVersionKind, obj metav1.Object) {
	if c.opts.ReadYourWritesTimeout < 0 {
		return
	}
	c.mark(writeKey{gvk.GroupKind(), obj.GetNamespace(), obj.GetName()}, &writeMark{gone: true, uid: string(obj.GetUID()), at: time.Now()})
}

func (c *Cache) mark(k writeKey, m *writeMark) {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	if len(c.marks) >= maxMarks {
		c.sweepLocked(m.at)
	}
	if old, ok := c.marks[k]; ok && !m.gone && !old.gone && old.rv > m.rv {
		return // an older answer arriving late
	}
	c.marks[k] = m
	c.hasMarks.Store(true)
}

func (c *Cache) markFor(k writeKey) (*writeMark, bool) {
	if !c.hasMarks.Load() {
		return nil, false // the usual case: no lock on the read path
	}
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	c.maybeSweepLocked()
	m, ok := c.marks[k]
	return m, ok
}

// marksOf returns the marks of kind gk, in namespace ns unless ns is empty.
func (c *Cache) marksOf(gk schema.GroupKind, ns string) []pendingWrite {
	if !c.hasMarks.Load() {
		return nil
	}
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	c.maybeSweepLocked()
	var out []pendingWrite
	for k, m := range c.marks {
		if k.gk == gk && (ns == "" || k.namespace == ns) {
			out = append(out, pendingWrite{k, m})
		}
	}
	return out
}

// maybeSweepLocked drops the expired marks now and then: marks of objects
// never read back (pruned children, kinds only listed) would keep reads on
// the slow path. marksMu is held.
func (c *Cache) maybeSweepLocked() {
	if now := time.Now(); now.Sub(c.swept) > markTTL {
		c.sweepLocked(now)
	}
}

// sweepLocked forgets marks older than markTTL; marksMu is held.
func (c *Cache) sweepLocked(now time.Time) {
	for key, old := range c.marks {
		if now.Sub(old.at) > markTTL {
			delete(c.marks, key)
		}
	}
	c.swept = now
	c.hasMarks.Store(len(c.marks) > 0)
}

// settle forgets a mark once the cache has caught up with it: once every
// informer of the kind that could show the object reflects the write. An
// informer that caught up says nothing of the others, which may lag.
func (c *Cache) settle(k writeKey, m *writeMark) {
	if !c.everywhere(k, m) {
		return
	}
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	if cur, ok := c.marks[k]; ok && cur == m {
		delete(c.marks, k)
		c.hasMarks.Store(len(c.marks) > 0)
	}
}

// everywhere reports whether every informer of k's kind that could show
// the object reflects m.
func (c *Cache) everywhere(k writeKey, m *writeMark) bool {
	c.mu.Lock()
	var entries []*entry
	for key, e := range c.entries {
		if key.gvk.GroupKind() == k.gk && (key.namespace == "" || key.namespace == k.namespace) {
			entries = append(entries, e)
		}
	}
	c.mu.Unlock()
	p := pendingWrite{k, m}
	for _, e := range entries {
		if e.shows(p, ListOptions{}) && !e.fresh(p.storeKey(), m) {
			return false
		}
	}
	return true
}

// shows reports whether a read of e with lo could show the object of p,
// before or after the write: e holds it and it matches lo, or e does not
// hold it and the written object matches e's selection and lo. Whether an
// object e does not hold matches a field selector cannot be told here: it
// counts as not shown, so that reads do not wait for an object e never
// holds.
func (e *entry) shows(p pendingWrite, lo ListOptions) bool {
	if obj, held, _ := e.informer.GetIndexer().GetByKey(p.storeKey()); held {
		if lo.Labels == nil {
			return true
		}
		o, ok := obj.(metav1.Object)
		return !ok || lo.Labels.Matches(labels.Set(o.GetLabels())) || !p.m.gone && lo.Labels.Matches(labels.Set(p.m.labels))
	}
	if p.m.gone || e.key.fields != "" || e.outsideShard(p) {
		return false
	}
	set := labels.Set(p.m.labels)
	return (e.selector == nil || e.selector.Matches(set)) && (lo.Labels == nil || lo.Labels.Matches(set))
}

// excludes reports whether e's selection rules out the object of p as
// written, while e does not hold it: e never receives that object, and its
// store's resource version moves past the write only with the next event
// e does select, so a read waiting for the write would wait for nothing.
// Of a field selector, only metadata.name and metadata.namespace can be
// told here; a Get of an object other fields might rule out waits.
func (e *entry) excludes(p pendingWrite) bool {
	if p.m.gone {
		return false
	}
	out := e.selector != nil && !e.selector.Matches(labels.Set(p.m.labels)) || e.outsideShard(p)
	if !out && e.key.fields != "" {
		if sel, err := fields.ParseSelector(e.key.fields); err == nil {
			known := fields.Set{"metadata.name": p.k.name, "metadata.namespace": p.k.namespace}
			for _, r := range sel.Requirements() {
				if !cachedFields[r.Field] {
					continue
				}
				switch r.Operator {
				case selection.Equals, selection.DoubleEquals:
					out = out || known[r.Field] != r.Value
				case selection.NotEquals:
					out = out || known[r.Field] == r.Value
				}
			}
		}
	}
	if !out {
		return false
	}
	_, held, _ := e.informer.GetIndexer().GetByKey(p.storeKey())
	return !held
}

// outsideShard reports whether e's shard selector rules out the object of
// p: by its namespace, or by its UID when the write's answer gave one.
func (e *entry) outsideShard(p pendingWrite) bool {
	if e.shard == nil || e.shard.field == sharding.ByUID && p.m.uid == "" {
		return false
	}
	return !e.shard.matchesMeta(p.k.namespace, p.m.uid)
}

// pendingWrite is one mark a read waits for.
type pendingWrite struct {
	k writeKey
	m *writeMark
}

func (p pendingWrite) storeKey() string {
	if p.k.namespace == "" {
		return p.k.name
	}
	return p.k.namespace + "/" + p.k.name
}

// fresh reports whether e's store reflects m for key.
func (e *entry) fresh(key string, m *writeMark) bool {
	obj, exists, _ := e.informer.GetIndexer().GetByKey(key)
	if m.gone {
		if !exists {
			return true
		}
		o, ok := obj.(metav1.Object)
		return ok && m.uid != "" && string(o.GetUID()) != m.uid
	}
	if exists {
		if o, ok := obj.(metav1.Object); ok {
			if rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64); err == nil {
				return rv >= m.rv
			}
		}
		return true
	}
	// Absent: fresh if the store has applied events past our write (the
	// object was deleted since), or if it is outside this informer's
	// selection. The store's own resource version counts, not the
	// reflector's: the reflector moves on as soon as an event is queued,
	// before the store holds it, and a read in between would miss an object
	// just created. Stores report their resource version with client-go's
	// AtomicFIFO feature (on by default); without it the reflector's is the
	// best there is.
	rv := e.informer.GetIndexer().LastStoreSyncResourceVersion()
	if rv == "" {
		rv = e.informer.LastSyncResourceVersion()
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	return err == nil && n >= m.rv
}

// awaitOwnWrite waits until e reflects this process's last write of
// namespace/name, if there is one, bounded by the read-your-writes timeout.
func (e *entry) awaitOwnWrite(ctx context.Context, namespace, name string) error {
	k := writeKey{e.key.gvk.GroupKind(), namespace, name}
	m, ok := e.cache.markFor(k)
	if !ok || e.excludes(pendingWrite{k, m}) {
		return nil
	}
	return e.await(ctx, []pendingWrite{{k, m}})
}

// awaitOwnWrites waits until e reflects every write of this process that a
// List with lo could show (see shows), bounded by the read-your-writes
// timeout.
func (e *entry) awaitOwnWrites(ctx context.Context, lo ListOptions) error {
	ns := e.key.namespace
	if lo.Namespace != "" {
		ns = lo.Namespace
	}
	marks := e.cache.marksOf(e.key.gvk.GroupKind(), ns)
	if len(marks) == 0 {
		return nil
	}
	relevant := marks[:0]
	for _, p := range marks {
		if e.shows(p, lo) {
			relevant = append(relevant, p)
		}
	}
	return e.await(ctx, relevant)
}

// await waits until e is fresh for every write in pending, settling each
// one it reflects, bounded by the read-your-writes timeout and ctx.
func (e *entry) await(ctx context.Context, pending []pendingWrite) error {
	c := e.cache
	check := func() {
		rest := pending[:0]
		for _, p := range pending {
			if e.fresh(p.storeKey(), p.m) {
				c.settle(p.k, p.m)
				continue
			}
			rest = append(rest, p)
		}
		pending = rest
	}
	if check(); len(pending) == 0 {
		return nil
	}
	timeout := c.opts.ReadYourWritesTimeout
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return e.staleError(timeout, pending)
		case <-time.After(wait):
		}
		if check(); len(pending) == 0 {
			return nil
		}
	}
}

// staleError names the writes the cache did not catch up with.
func (e *entry) staleError(timeout time.Duration, pending []pendingWrite) error {
	sort.Slice(pending, func(i, j int) bool { return pending[i].storeKey() < pending[j].storeKey() })
	const shown = 5
	parts := make([]string, 0, min(len(pending), shown))
	for i, p := range pending {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(pending)-shown))
			break
		}
		what := fmt.Sprintf("resourceVersion %d", p.m.rv)
		if p.m.gone {
			what = "its deletion"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", p.storeKey(), what))
	}
	return fmt.Errorf("cache for %s has not caught up within %v with this process's write of %s; retry later", e.desc, timeout, strings.Join(parts, ", "))
}
