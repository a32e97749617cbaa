package shard

import (
	"fmt"
	"maps"
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/reconcile"
)

// Marks returns the controller's name and its marks of the buckets of bs
// it can say for. The mark of a bucket is the lowest resourceVersion an
// object of the bucket may have and still carry a change of the primary
// kind this controller did not reconcile: the lowest resourceVersion of
// the bucket's objects its queue still owes a change or a retry (as
// cached), or, when lower, one above the highest its listener queued
// (every later watch event is above that). A mark stays true once taken:
// what was reconciled stays reconciled. A bucket gets none when it is not
// read here; when its listener has not yet seen the whole initial list or
// the informer listed again (a list's objects come in no order of
// resourceVersion); when resourceVersions are not decimal integers; or
// when the controller is stopping and the bucket was not held when it
// began to (its queue no longer takes keys). The marks of the buckets held
// when the controller began to stop are the ones taken then.
func (p *Primary[T]) Marks(bs []int) (controller string, rvs map[int]string) {
	p.mu.Lock()
	frozen := p.frozen
	reads := make(map[int]*bucketRead[T], len(bs))
	for _, b := range bs {
		if rd := p.reads[b]; rd != nil {
			reads[b] = rd
		}
	}
	p.mu.Unlock()
	if frozen == nil {
		return p.ctl, p.marksOf(reads)
	}
	rvs = map[int]string{}
	for _, b := range bs {
		if rv := frozen[b]; rv != "" {
			rvs[b] = rv
		}
	}
	return p.ctl, rvs
}

// marksOf takes the marks of the buckets reads reads (see Marks). Each
// bucket's delivered is read before the queue is: whatever the listener
// queued after that read is above it, and what it queued up to there, the
// queue still owes or a worker reconciled. An owed key is looked up once,
// in the bucket that holds it.
func (p *Primary[T]) marksOf(reads map[int]*bucketRead[T]) map[int]string {
	rvs := map[int]string{}
	if p.owed == nil || len(reads) == 0 {
		return rvs
	}
	marks := make(map[int]uint64, len(reads))
	for b, rd := range reads {
		marks[b] = rd.delivered.Load() + 1
	}
	var owed []reconcile.Request
	p.owed(func(req reconcile.Request, r reconcile.Reason) {
		// Not keys asked for only by replays or by RequeueAfter.
		if r == reconcile.ReasonChange || r == reconcile.ReasonRetry {
			owed = append(owed, req)
		}
	})
	for b, rd := range reads {
		// Checked after the queue was read: a list begun before then
		// shows here.
		if marks[b] == 1 || rd.unordered.Load() || rd.reg == nil || !rd.reg.HasSynced() || rd.inf.Relists() > 1 {
			delete(marks, b)
		}
	}
	for _, req := range owed {
		key := types.NamespacedName{Namespace: req.Namespace, Name: req.Name}
		b, ok := p.shards.BucketOf(key)
		mark, marked := marks[b]
		if !ok || !marked {
			continue // of a bucket not asked for, or deleted: not listed by the next holder
		}
		obj, ok := hooks.Peek[T](reads[b].inf, key)
		if !ok {
			continue
		}
		rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
		if err != nil {
			delete(marks, b)
			continue
		}
		marks[b] = min(mark, rv)
	}
	for b, mark := range marks {
		rvs[b] = strconv.FormatUint(mark, 10)
	}
	return rvs
}

// Describe names the controller and its kind: "cms (ConfigMap)".
func (p *Primary[T]) Describe() string {
	return fmt.Sprintf("%s (%s)", p.ctl, p.kind.GroupKind())
}

// Freeze is Gate.Freeze: it takes the marks of every held bucket, for
// the controller's stop: its workers then stop taking keys, so the queue
// no longer says what is owed.
func (p *Primary[T]) Freeze() {
	p.mu.Lock()
	reads := maps.Clone(p.reads)
	p.mu.Unlock()
	frozen := p.marksOf(reads)
	p.mu.Lock()
	p.frozen = frozen
	p.mu.Unlock()
}
