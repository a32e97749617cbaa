package informers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Read-your-own-writes: the client tells the cache about each write it
// makes (ObserveWrite, ObserveDeletion); a later Get of that object waits,
// bounded, until the cache holds that write or something newer. A reconcile
// that follows its own write therefore never acts on the state before it:
// no duplicate creates, no conflict loops.

// writeKey names one object across informer modes and selections.
type writeKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// writeMark is the newest write this process made to one object.
type writeMark struct {
	rv   uint64 // resource version the server answered; 0 with gone
	gone bool   // the object was deleted outright
	uid  string // with gone: the deleted object's UID, if known
	at   time.Time
}

const (
	defaultReadYourWritesTimeout = 10 * time.Second
	// maxMarks bounds the marks kept for objects never read back.
	maxMarks = 8192
	markTTL  = time.Minute
)

// ObserveWrite records that this process wrote the object and the server
// answered with resourceVersion rv. Writers call it; readers then wait for
// the cache to catch up (see Get). Resource versions that are not numbers
// are ignored.
func (c *Cache) ObserveWrite(gvk schema.GroupVersionKind, namespace, name, rv string) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || c.opts.ReadYourWritesTimeout < 0 {
		return
	}
	c.mark(writeKey{gvk.GroupKind(), namespace, name}, writeMark{rv: n, at: time.Now()})
}

// ObserveDeletion records that this process deleted the object with the
// given UID (empty if unknown) and the server removed it at once (no
// finalizers held it). Reads then wait until the cache no longer holds it;
// an object re-created under the same name (another UID) counts as fresh.
func (c *Cache) ObserveDeletion(gvk schema.GroupVersionKind, namespace, name, uid string) {
	if c.opts.ReadYourWritesTimeout < 0 {
		return
	}
	c.mark(writeKey{gvk.GroupKind(), namespace, name}, writeMark{gone: true, uid: uid, at: time.Now()})
}

func (c *Cache) mark(k writeKey, m writeMark) {
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

func (c *Cache) markFor(k writeKey) (writeMark, bool) {
	if !c.hasMarks.Load() {
		return writeMark{}, false // the usual case: no lock on the read path
	}
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	// Marks of objects never read back (pruned children, kinds only
	// listed) would keep reads on this path; drop the expired ones now and
	// then.
	if now := time.Now(); now.Sub(c.swept) > markTTL {
		c.sweepLocked(now)
	}
	m, ok := c.marks[k]
	return m, ok
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

// settle forgets a mark once the cache has caught up with it.
func (c *Cache) settle(k writeKey, m writeMark) {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	if cur, ok := c.marks[k]; ok && cur == m {
		delete(c.marks, k)
		c.hasMarks.Store(len(c.marks) > 0)
	}
}

// fresh reports whether e's store reflects m for key.
func (e *entry) fresh(key string, m writeMark) bool {
	obj, exists, _ := e.informer.GetIndexer().GetByKey(key)
	if m.gone {
		if !exists {
			return true
		}
		o, ok := obj.(Object)
		return ok && m.uid != "" && string(o.GetUID()) != m.uid
	}
	if exists {
		if o, ok := obj.(Object); ok {
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
func (e *entry) awaitOwnWrite(ctx context.Context, namespace, name, key string) error {
	c := e.cache
	k := writeKey{e.key.gvk.GroupKind(), namespace, name}
	m, ok := c.markFor(k)
	if !ok {
		return nil
	}
	if e.fresh(key, m) {
		c.settle(k, m)
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
			what := fmt.Sprintf("resourceVersion %d", m.rv)
			if m.gone {
				what = "its deletion"
			}
			return fmt.Errorf("cache for %s has not caught up within %v with this process's write of %s (%s); retry later", e.desc, timeout, key, what)
		case <-time.After(wait):
		}
		if e.fresh(key, m) {
			c.settle(k, m)
			return nil
		}
	}
}
