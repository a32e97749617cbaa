// Package history keeps a controller's recent reconciles in a fixed memory
// budget: the last few of each recently reconciled key, and a five-minute
// series of counts, errors and durations, which the debug endpoint, its
// page and converge explain show.
package history

import (
	"strings"
	"sync"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

// The memory budget of a controller's history: the last historyDepth
// reconciles of each of the HistoryKeys (ControllerOptions.HistoryKeys)
// most recently reconciled keys, each error text cut to maxErrorText
// bytes. A key holds as many records as it had reconciles, up to
// historyDepth: with the default 1024 keys each reconciled once (a
// controller after its first sync) that is about 0.4 MB per controller
// (BenchmarkHistory100kKeys measures it), about 0.9 MB when each holds
// historyDepth records, and 3.5 MB at most when every record holds a long
// error, however many objects the controller reconciles.
const (
	historyDepth        = 5
	maxErrorText        = 512
	defaultHistoryKeys  = 1024
	SeriesBucket        = 5 * time.Second
	seriesBuckets       = 60 // five minutes
	historyTruncatedTag = " …(truncated)"
)

// Record is one finished reconcile, as the history keeps it.
type Record struct {
	Start        time.Time
	Took         time.Duration
	RequeueAfter time.Duration
	Retries      int
	Worker       int
	Reason       reconcile.Reason
	Result       string
	Err          string
	Blocked      *reconcile.Blocker // shared, never modified
}

// keyHistory is the slot of one key: its last records, newest at
// recs[(n-1)%historyDepth], and its neighbours in the LRU list. recs grows
// with the key's reconciles up to historyDepth, and keeps its capacity
// when the slot is recycled for another key.
type keyHistory struct {
	req        reconcile.Request
	recs       []Record
	n          int
	prev, next int32
}

// Point is one bucket of a controller's recent activity.
type Point struct {
	Bucket int64 // start of the bucket, in SeriesBucket units since the epoch
	N      int
	Errors int
	Took   time.Duration
}

// History keeps a controller's recent reconciles: per key, in a fixed array
// Of slots recycled least recently used first, and per five-second bucket
// for the last five minutes. Recording takes mu once and allocates nothing
// once the slots hold as many records as their keys get (an error text cut
// to size is copied), so it stays off the cost of a reconcile. A History
// is safe for concurrent use.
type History struct {
	mu sync.Mutex
	// slots, index, head and tail are the LRU of keys; mu guards every
	// field. head is the most recently used slot, tail the least; -1 when
	// empty. slots is allocated at the first record, at its full size.
	size       int
	slots      []keyHistory
	index      map[reconcile.Request]int32
	head, tail int32
	// series is a ring of buckets, by bucket number modulo seriesBuckets.
	series [seriesBuckets]Point
	// total and errors count every reconcile recorded.
	total, errors uint64
}

// New returns a History of size keys; size < 0 keeps only the
// series and totals.
func New(size int) *History {
	if size == 0 {
		size = defaultHistoryKeys
	}
	return &History{size: max(size, 0), head: -1, tail: -1}
}

// Record adds r, a reconcile of req.
func (h *History) Record(req reconcile.Request, r Record) {
	if len(r.Err) > maxErrorText {
		// Copy, so that the history does not keep a huge error alive.
		r.Err = strings.Clone(r.Err[:maxErrorText]) + historyTruncatedTag
	}
	if r.Blocked != nil && len(r.Blocked.Message) > maxErrorText {
		b := *r.Blocked
		b.Message = strings.Clone(b.Message[:maxErrorText]) + historyTruncatedTag
		r.Blocked = &b
	}
	failed := r.Err != ""
	b := r.Start.UnixNano() / int64(SeriesBucket)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total++
	if failed {
		h.errors++
	}
	p := &h.series[b%seriesBuckets]
	if p.Bucket != b {
		*p = Point{Bucket: b}
	}
	p.N++
	if failed {
		p.Errors++
	}
	p.Took += r.Took
	if h.size == 0 {
		return
	}
	s := h.slotLocked(req)
	if len(s.recs) < historyDepth {
		if len(s.recs) == cap(s.recs) {
			grown := make([]Record, len(s.recs), min(max(2*cap(s.recs), 1), historyDepth))
			copy(grown, s.recs)
			s.recs = grown
		}
		s.recs = s.recs[:len(s.recs)+1]
	}
	s.recs[s.n%historyDepth] = r
	s.n++
}

// slotLocked returns req's slot, made most recently used; a key seen for
// the first time takes a free slot or the least recently used one.
func (h *History) slotLocked(req reconcile.Request) *keyHistory {
	if h.slots == nil {
		h.slots = make([]keyHistory, 0, h.size)
		h.index = make(map[reconcile.Request]int32, h.size)
	}
	i, ok := h.index[req]
	switch {
	case ok:
		h.unlinkLocked(i)
	case len(h.slots) < h.size:
		i = int32(len(h.slots))
		h.slots = append(h.slots, keyHistory{})
	default:
		i = h.tail
		h.unlinkLocked(i)
		if j, ok := h.index[h.slots[i].req]; ok && j == i { // not a forgotten slot
			delete(h.index, h.slots[i].req)
		}
	}
	s := &h.slots[i]
	if !ok {
		recs := s.recs[:cap(s.recs)]
		clear(recs) // the last key's errors go
		*s = keyHistory{req: req, recs: recs[:0]}
		h.index[req] = i
	}
	s.prev, s.next = -1, h.head
	if h.head >= 0 {
		h.slots[h.head].prev = i
	}
	h.head = i
	if h.tail < 0 {
		h.tail = i
	}
	return s
}

func (h *History) unlinkLocked(i int32) {
	s := &h.slots[i]
	if s.prev >= 0 {
		h.slots[s.prev].next = s.next
	} else {
		h.head = s.next
	}
	if s.next >= 0 {
		h.slots[s.next].prev = s.prev
	} else {
		h.tail = s.prev
	}
}

// of returns req's records, newest first; nil when none is kept.
func (h *History) Of(req reconcile.Request) []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok := h.index[req]
	if !ok {
		return nil
	}
	s := &h.slots[i]
	n := min(s.n, historyDepth)
	out := make([]Record, n)
	for j := range n {
		out[j] = s.recs[(s.n-1-j)%historyDepth]
	}
	return out
}

// EachLast calls fn with the last record of every key the history holds,
// most recently used first, with the history's lock held: fn must be quick
// and must not keep r.
func (h *History) EachLast(fn func(req reconcile.Request, r *Record)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := h.head; i >= 0; i = h.slots[i].next {
		s := &h.slots[i]
		if s.n > 0 {
			fn(s.req, &s.recs[(s.n-1)%historyDepth])
		}
	}
}

// ForgetCluster drops the records of every key of the cluster named
// cluster (reconcile.Request.Cluster), which was disengaged, and returns
// how many keys it dropped. Their slots go to the least recently used end,
// to be taken first, and their records are freed.
func (h *History) ForgetCluster(cluster string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for req, i := range h.index {
		if req.Cluster != cluster {
			continue
		}
		delete(h.index, req)
		h.unlinkLocked(i)
		h.slots[i] = keyHistory{prev: h.tail, next: -1}
		if h.tail >= 0 {
			h.slots[h.tail].next = i
		} else {
			h.head = i
		}
		h.tail = i
		n++
	}
	return n
}

// Keys returns how many keys the history holds.
func (h *History) Keys() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.index)
}

// Recent returns the buckets of the last five minutes up to now, oldest
// first, and the totals.
func (h *History) Recent(now time.Time) (points []Point, total, errors uint64) {
	last := now.UnixNano() / int64(SeriesBucket)
	points = make([]Point, seriesBuckets)
	h.mu.Lock()
	defer h.mu.Unlock()
	for j := range seriesBuckets {
		b := last - int64(seriesBuckets-1-j)
		if p := h.series[b%seriesBuckets]; p.Bucket == b {
			points[j] = p
		} else {
			points[j] = Point{Bucket: b}
		}
	}
	return points, h.total, h.errors
}
