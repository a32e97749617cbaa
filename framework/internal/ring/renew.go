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
	seen := ""
	if r.Spreads() {
		seen = viewDigest(r.clusterView())
	}
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
	renewals := make(map[unit]renewal, len(r.held))
	var serving []int
	for u, h := range r.held {
		renewals[u] = renewal{h, h.lease.DeepCopy()}
		if h.state == bucketServing && !u.isCluster() {
			serving = append(serving, u.b)
		}
	}
	users := slices.Clone(r.users)
	r.mu.Unlock()

	// The layout Lease and the member Lease are written at once, and
	// before the buckets: a member refused by the layout renews none.
	var writes sync.WaitGroup
	writes.Go(func() { r.writeLayout(ctx) })
	start := time.Now()
	got, err := r.writeMember(ctx, member, seen)
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
	for u, x := range renewals {
		l := x.l
		if !u.isCluster() {
			l = r.withMarks(x.l, marks[u.b])
		}
		wg.Go(func() { r.renewUnit(ctx, u, l, x.h) })
	}
	wg.Wait()
}

// renewUnit renews u's Lease, last written as l, while h holds it; a
// unit whose Lease another member now holds, or that was deleted, is
// lost.
func (r *Ring) renewUnit(ctx context.Context, u unit, l *coordinationv1.Lease, h *heldBucket) {
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
		r.log.V(1).Info("renewing a "+u.kind()+"'s Lease failed", u.kv("error", err.Error())...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[u] != h {
		return // given up or lost meanwhile
	}
	switch {
	case lost != "":
		r.loseLocked(u, lost)
	case got != nil:
		h.lease = got
		if !start.IsZero() {
			h.renewed = start
		}
	}
}

// writeMember creates or renews the member Lease, last written as
// member (nil when not known), recording seen as the clusters found (none
// when "": the ring spreads no clusters).
func (r *Ring) writeMember(ctx context.Context, member *coordinationv1.Lease, seen string) (*coordinationv1.Lease, error) {
	start := time.Now()
	if member == nil {
		nl := r.newLease(r.memberName, RoleMember, start)
		if seen != "" {
			metav1.SetMetaDataAnnotation(&nl.ObjectMeta, seenAnno, seen)
		}
		got, err := r.leases.Create(ctx, nl, metav1.CreateOptions{})
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
	if seen != "" {
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, seenAnno, seen)
	}
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

// loseLocked forgets unit u at once: another member holds it. r.mu must
// be held.
func (r *Ring) loseLocked(u unit, why string) {
	h := r.held[u]
	if h == nil {
		return
	}
	delete(r.held, u)
	h.cancel()
	parts := r.participantsLocked(u)
	r.metrics.Handovers.WithLabelValues(r.opts.Ring, "lost").Inc()
	r.log.Info("lost "+u.kind()+": cancelling its reconciles", u.kv("why", why)...)
	go func() {
		for _, p := range parts {
			p.serve(h.ctx, false)
			p.drop(h.ctx)
		}
	}()
}

// deleteLease deletes the ring's Lease name if it is still at
// resourceVersion rv.
func (r *Ring) deleteLease(ctx context.Context, name, rv string) {
	err := r.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.log.V(1).Info("deleting the Lease of a cluster no member found failed", "lease", name, "error", err.Error())
	}
}

// Spreads reports whether the ring spreads clusters (SpreadClusters).
func (r *Ring) Spreads() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.spread != nil
}

// Leave releases every unit and deletes the member Lease, so that the
// other members take the units over at once. Call it once the sharded
// controllers stopped. A held cluster is disengaged before its Lease is
// released.
func (r *Ring) Leave(ctx context.Context) {
	r.mu.Lock()
	r.stopped = true
	held := r.held
	r.held = map[unit]*heldBucket{}
	users := slices.Clone(r.users)
	parts := map[unit][]participant{}
	for u := range held {
		if u.isCluster() {
			parts[u] = r.participantsLocked(u)
		}
	}
	r.mu.Unlock()
	var bs []int
	for u, h := range held {
		if h.state != bucketSyncing && !u.isCluster() {
			bs = append(bs, u.b)
		}
	}
	marks := userMarks(bs, users)
	for u, h := range held {
		for _, p := range parts[u] {
			p.serve(h.ctx, false)
			p.drop(h.ctx)
		}
		h.cancel()
		l := h.lease
		if !u.isCluster() {
			l = r.withMarks(h.lease, marks[u.b])
		}
		r.release(ctx, l)
	}
	r.releaseLayout(ctx)
	if err := r.leases.Delete(ctx, r.memberName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.log.Info("deleting the member Lease failed; it expires after LeaseDuration", "error", err.Error())
	}
	r.log.Info("left sharding ring", "released", len(held))
}
