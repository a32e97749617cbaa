package ring

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// renew renews the member Lease, then every claimed bucket's Lease at
// once. A bucket whose Lease another member now holds is lost. The
// requests are sent without r.mu held: the write fence (check) reads under
// it.
func (r *Ring) renew(ctx context.Context) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.lastRenew = time.Now()
	member := r.member
	type renewal struct {
		h *heldBucket
		l *coordinationv1.Lease // a copy of h.lease, to write
	}
	renewals := make(map[int]renewal, len(r.held))
	var serving []int
	for b, h := range r.held {
		renewals[b] = renewal{h, h.lease.DeepCopy()}
		if h.state == bucketServing {
			serving = append(serving, b)
		}
	}
	users := slices.Clone(r.users)
	r.mu.Unlock()

	// The layout Lease and the member Lease are written at once, and
	// before the buckets: a member refused by the layout renews none.
	var writes sync.WaitGroup
	writes.Go(func() { r.writeLayout(ctx) })
	start := time.Now()
	got, err := r.writeMember(ctx, member)
	r.mu.Lock()
	switch {
	case err == nil:
		r.member, r.memberRenewed = got, start
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.member = nil // read or create it again at the next renewal
	}
	r.mu.Unlock()
	if err != nil {
		r.log.V(1).Info("renewing the member Lease failed", "error", err.Error())
	}
	writes.Wait()
	r.mu.RLock()
	refused := r.refused != nil
	r.mu.RUnlock()
	if refused {
		return // its buckets were given up
	}

	// Each renewal of a served bucket carries the marks taken now: should
	// this member crash, the next holder queues as changes only what
	// changed since, and what was still owed.
	marks := userMarks(serving, users)
	// The bucket Leases are renewed at once: one after another, a round
	// would grow with the buckets held, and the member Lease, renewed
	// once a round, could then go unrenewed for longer than RenewDeadline.
	var wg sync.WaitGroup
	for b, x := range renewals {
		l := r.withMarks(x.l, marks[b])
		wg.Go(func() { r.renewBucket(ctx, b, l, x.h) })
	}
	wg.Wait()
}

// renewBucket renews bucket b's Lease, last written as l, while h holds
// it; a bucket whose Lease another member now holds, or that was deleted,
// is lost.
func (r *Ring) renewBucket(ctx context.Context, b int, l *coordinationv1.Lease, h *heldBucket) {
	start := time.Now()
	now := metav1.NewMicroTime(start)
	l.Spec.RenewTime = &now
	got, err := r.leases.Update(ctx, l, metav1.UpdateOptions{})
	var lost string
	switch {
	case err == nil:
	case apierrors.IsConflict(err):
		cur, gerr := r.leases.Get(ctx, l.Name, metav1.GetOptions{})
		switch {
		case gerr == nil && Holder(cur) == r.opts.Lease.Identity && LayoutOf(cur) == r.layout:
			got = cur // renewed at the next round
			start = time.Time{}
		case gerr == nil && Holder(cur) == r.opts.Lease.Identity:
			lost = "its Lease records another layout: " + LayoutOf(cur).String()
		case gerr == nil:
			lost = "its Lease is held by " + strconv.Quote(Holder(cur))
		case apierrors.IsNotFound(gerr):
			lost = "its Lease was deleted"
		}
	case apierrors.IsNotFound(err):
		lost = "its Lease was deleted"
	default:
		r.log.V(1).Info("renewing a bucket's Lease failed", "bucket", b, "error", err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[b] != h {
		return // given up or lost meanwhile
	}
	switch {
	case lost != "":
		r.loseLocked(b, lost)
	case got != nil:
		h.lease = got
		if !start.IsZero() {
			h.renewed = start
		}
	}
}

// writeMember creates or renews the member Lease, last written as
// member (nil when not known).
func (r *Ring) writeMember(ctx context.Context, member *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	start := time.Now()
	if member == nil {
		got, err := r.leases.Create(ctx, r.newLease(r.memberName, RoleMember, start), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return got, err
		}
		// A Lease of this identity from an earlier run: take it over.
		if member, err = r.leases.Get(ctx, r.memberName, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	l := member.DeepCopy()
	now := metav1.NewMicroTime(start)
	secs := int32(r.opts.Lease.Duration.Round(time.Second) / time.Second)
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &r.opts.Lease.Identity, &now, &secs
	r.layout.Annotate(l) // an earlier run's may differ
	return r.leases.Update(ctx, l, metav1.UpdateOptions{})
}

// release clears the holder of bucket Lease l, if this member still holds
// it, and writes l's annotations with it (the marks withMarks set).
func (r *Ring) release(ctx context.Context, l *coordinationv1.Lease) {
	marks, hasMarks := l.Annotations[marksAnno]
	for range 3 {
		c := l.DeepCopy()
		empty := ""
		c.Spec.HolderIdentity = &empty
		_, err := r.leases.Update(ctx, c, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			if err != nil && !apierrors.IsNotFound(err) {
				r.log.Info("releasing a bucket's Lease failed; it expires after LeaseDuration", "lease", l.Name, "error", err.Error())
			}
			return
		}
		cur, err := r.leases.Get(ctx, l.Name, metav1.GetOptions{})
		if err != nil || Holder(cur) != r.opts.Lease.Identity {
			return
		}
		if hasMarks {
			metav1.SetMetaDataAnnotation(&cur.ObjectMeta, marksAnno, marks)
		}
		l = cur
	}
}

// loseLocked forgets bucket b at once: another member holds it. r.mu must
// be held.
func (r *Ring) loseLocked(b int, why string) {
	h := r.held[b]
	if h == nil {
		return
	}
	delete(r.held, b)
	h.cancel()
	users := slices.Clone(r.users)
	r.metrics.Handovers.WithLabelValues(r.opts.Ring, "lost").Inc()
	r.log.Info("lost bucket: cancelling its reconciles", "bucket", b, "why", why)
	go func() {
		for _, u := range users {
			u.Serve(h.ctx, b, false)
			u.Drop(h.ctx, b)
		}
	}()
}

// Leave releases every bucket and deletes the member Lease, so that the
// other members take the buckets over at once. Call it once the sharded
// controllers stopped.
func (r *Ring) Leave(ctx context.Context) {
	r.mu.Lock()
	r.stopped = true
	held := r.held
	r.held = map[int]*heldBucket{}
	users := slices.Clone(r.users)
	r.mu.Unlock()
	var bs []int
	for b, h := range held {
		if h.state != bucketSyncing {
			bs = append(bs, b)
		}
	}
	marks := userMarks(bs, users)
	for b, h := range held {
		h.cancel()
		r.release(ctx, r.withMarks(h.lease, marks[b]))
	}
	r.releaseLayout(ctx)
	if err := r.leases.Delete(ctx, r.memberName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.log.Info("deleting the member Lease failed; it expires after LeaseDuration", "error", err.Error())
	}
	r.log.Info("left sharding ring", "released", len(held))
}
