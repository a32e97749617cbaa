package ring

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/internal/syncgc"
)

// assess looks at the ring: which members are live, which buckets this
// member should hold; it claims the buckets it should hold that are free,
// and starts handing over those it should not.
func (r *Ring) assess(ctx context.Context) {
	leases := r.ringLeases()
	view := r.clusterView()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	now := time.Now()
	byName := r.observeLocked(leases, now)
	members := r.liveMembersLocked(leases, now)
	if !slices.Equal(members, r.members) {
		r.log.Info("ring members changed", "members", members, "before", r.members)
		r.members = members
	}
	r.assessed = true
	if !r.formed {
		r.formed = r.formingOverLocked(leases, members, now)
	}
	// Units are claimed only while this member holds the ring's layout
	// (see writeLayout): a member of another layout may then hold none.
	mayClaim := r.formed && r.refused == nil && now.Sub(r.layoutRenewed) < r.opts.Lease.RenewDeadline
	claims := r.rebalanceLocked(ctx, byName, members, mayClaim, now)
	r.seenCount = len(view)
	claims = append(claims, r.rebalanceClustersLocked(ctx, byName, members, view, mayClaim, now)...)
	r.metrics.set(r.countLocked())
	r.mu.Unlock()
	for _, c := range claims {
		r.claim(ctx, c.u, c.lease, c.why)
	}
	r.mu.Lock() // for the deferred unlock
}

// observeLocked notes when each of leases was first seen at its
// resourceVersion, forgets the Leases gone, and returns leases by name.
// r.mu must be held.
func (r *Ring) observeLocked(leases []*coordinationv1.Lease, now time.Time) map[string]*coordinationv1.Lease {
	byName := make(map[string]*coordinationv1.Lease, len(leases))
	for _, l := range leases {
		byName[l.Name] = l
		if o, ok := r.seen[l.Name]; !ok || o.rv != l.ResourceVersion {
			o := observation{rv: l.ResourceVersion, since: now, at: now}
			if !ok {
				o.since = r.backdateLocked(l, now)
			}
			r.seen[l.Name] = o
		}
	}
	for name := range r.seen {
		if byName[name] == nil {
			delete(r.seen, name)
		}
	}
	return byName
}

// liveMembersLocked returns the sorted identities of the live members of
// this member's layout: itself while its member Lease was renewed within
// RenewDeadline and it is not refused, and every other member whose Lease
// changed within Lease.Duration. r.mu must be held.
func (r *Ring) liveMembersLocked(leases []*coordinationv1.Lease, now time.Time) []string {
	var members []string
	if r.member != nil && now.Sub(r.memberRenewed) < r.opts.Lease.RenewDeadline && r.refused == nil {
		members = append(members, r.opts.Lease.Identity)
	}
	for _, l := range leases {
		id := Holder(l)
		if l.Labels[RoleLabel] != RoleMember || l.Name == r.memberName || id == "" || l.DeletionTimestamp != nil {
			continue
		}
		if now.Sub(r.seen[l.Name].since) >= r.opts.Lease.Duration {
			continue // not renewed for Lease.Duration: gone
		}
		if err := r.compatible(l); err != nil {
			if !r.ignored[l.Name] {
				r.ignored[l.Name] = true
				r.log.Error(err, "ignoring an incompatible member of the ring")
			}
			continue
		}
		members = append(members, id)
	}
	slices.Sort(members)
	return members
}

// unitClaim is a unit the assignment gives this member, its Lease as
// cached, and why it may be claimed now.
type unitClaim struct {
	u     unit
	lease *coordinationv1.Lease
	why   string
}

// rebalanceLocked starts handing over the held buckets the assignment over
// members gives to others, and returns those it gives this member that it
// may claim now (when mayClaim). r.mu must be held.
func (r *Ring) rebalanceLocked(ctx context.Context, byName map[string]*coordinationv1.Lease, members []string, mayClaim bool, now time.Time) []unitClaim {
	var claims []unitClaim
	for b, owner := range Assign(r.buckets.Count, members) {
		u := bucketUnit(b)
		h := r.held[u]
		switch {
		case owner == r.opts.Lease.Identity && h == nil && mayClaim:
			l := byName[BucketLeaseName(r.opts.Ring, b)]
			if why := r.claimable(l, now); why != "" {
				claims = append(claims, unitClaim{u, l, why})
			}
		case owner != r.opts.Lease.Identity && h != nil && h.state != bucketDraining:
			// A bucket still syncing goes too: its reads end with its
			// context, and one that cannot be read here (its acquire
			// retrying) is not kept from a member that may read it.
			h.state = bucketDraining
			go r.handOver(ctx, u, h, owner)
		}
	}
	return claims
}

// formingOverLocked reports whether this member may claim buckets: it has
// waited FormationDelay since it joined, or another live member (members)
// holds a bucket Lease it renewed within Lease.Duration (by the renewal
// time the Lease carries: a crashed member's Lease looks live to a member
// that just joined until it has watched it for Lease.Duration). Until then
// the ring is forming, and the members that join meanwhile are counted in
// the first claims. r.mu must be held.
func (r *Ring) formingOverLocked(leases []*coordinationv1.Lease, members []string, now time.Time) bool {
	if now.Sub(r.joined) >= r.opts.FormationDelay {
		return true
	}
	for _, l := range leases {
		h := Holder(l)
		if (l.Labels[RoleLabel] != RoleBucket && l.Labels[RoleLabel] != RoleCluster) || h == r.opts.Lease.Identity || !slices.Contains(members, h) || r.claimable(l, now) != "" {
			continue
		}
		if l.Spec.RenewTime != nil && now.Sub(l.Spec.RenewTime.Time) < r.opts.Lease.Duration {
			return true
		}
	}
	r.log.V(1).Info("the ring is forming: waiting before claiming buckets", "members", members, "for", (r.opts.FormationDelay - now.Sub(r.joined)).Round(time.Millisecond))
	return false
}

// claimable says why bucket Lease l (nil when the bucket has none) may be
// claimed: "new", "released", or "expired" when this member saw it
// unchanged for Lease.Duration; "" when a live member holds it. r.mu must be
// held.
func (r *Ring) claimable(l *coordinationv1.Lease, now time.Time) string {
	switch {
	case l == nil:
		return "new"
	case Holder(l) == "":
		return "released"
	case now.Sub(r.seen[l.Name].since) >= r.opts.Lease.Duration:
		return "expired"
	}
	return ""
}

// Assign gives each bucket an owner among members (sorted): the member
// ranking highest for it by rendezvous hashing, then, while a member owns
// more than ceil(buckets/members), the bucket of that member whose next
// choice under the limit ranks highest moves there. "" when there are no
// members. Every member computes the same assignment from the same
// members, and a member joining or leaving moves few buckets besides its
// own.
func Assign(buckets int, members []string) []string { return assignBy(buckets, score, members, false) }

// assignBy gives each of n units an owner among members (sorted), as
// Assign does, ranking member m for unit i by score(m, i). With even, a
// member below floor(n/members) then takes, one at a time, the unit of a
// member above it that ranks it highest, so that loads differ by one at
// most.
func assignBy(n int, score func(member string, i int) uint64, members []string, even bool) []string {
	owners := make([]string, n)
	if len(members) == 0 {
		return owners
	}
	limit := (n + len(members) - 1) / len(members)
	ranked := make([][]string, n)
	load := make(map[string]int, len(members))
	for b := range owners {
		ranked[b] = slices.Clone(members)
		sort.SliceStable(ranked[b], func(i, j int) bool { return score(ranked[b][i], b) > score(ranked[b][j], b) })
		owners[b] = ranked[b][0]
		load[owners[b]]++
	}
	for {
		over := ""
		for _, m := range members {
			if load[m] > limit {
				over = m
				break
			}
		}
		if over == "" {
			if even {
				fill(owners, load, n/len(members), score, members)
			}
			return owners
		}
		best, to, bestScore := -1, "", uint64(0)
		for b, o := range owners {
			if o != over {
				continue
			}
			for _, m := range ranked[b] {
				if m != over && load[m] < limit {
					if s := score(m, b); best < 0 || s > bestScore {
						best, to, bestScore = b, m, s
					}
					break
				}
			}
		}
		owners[best] = to
		load[over]--
		load[to]++
	}
}

// fill moves units to the members loaded below floor, each time the unit
// of a member above floor that ranks its taker highest.
func fill(owners []string, load map[string]int, floor int, score func(string, int) uint64, members []string) {
	for _, m := range members {
		for load[m] < floor {
			best, bestScore := -1, uint64(0)
			for i, o := range owners {
				if load[o] > floor {
					if s := score(m, i); best < 0 || s > bestScore {
						best, bestScore = i, s
					}
				}
			}
			load[owners[best]]--
			owners[best] = m
			load[m]++
		}
	}
}

func score(member string, bucket int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0, byte(bucket >> 8), byte(bucket)})
	return mix(h.Sum64())
}

// mix is splitmix64's finalizer: FNV of inputs that differ in a byte or
// two orders them alike for every unit; mix spreads them.
func mix(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// claim claims unit u, whose Lease was last seen as l (nil when it had
// none), with a compare-and-swap on that resourceVersion: it fails when
// the Lease changed since.
func (r *Ring) claim(ctx context.Context, u unit, l *coordinationv1.Lease, why string) {
	start := time.Now()
	stamp := metav1.NewMicroTime(start)
	secs := int32(r.opts.Lease.Duration.Round(time.Second) / time.Second)
	var (
		got *coordinationv1.Lease
		err error
	)
	if l == nil {
		nl := r.newLease(r.unitLease(u), u.role(), start)
		if u.isCluster() {
			nl.Labels[ClusterLabel] = u.c
		} else {
			nl.Labels[BucketLabel] = strconv.Itoa(u.b)
		}
		got, err = r.leases.Create(ctx, nl, metav1.CreateOptions{})
	} else {
		c := l.DeepCopy()
		r.layout.Annotate(c)
		c.Spec.HolderIdentity, c.Spec.AcquireTime, c.Spec.RenewTime, c.Spec.LeaseDurationSeconds = &r.opts.Lease.Identity, &stamp, &stamp, &secs
		n := int32(1)
		if c.Spec.LeaseTransitions != nil {
			n = *c.Spec.LeaseTransitions + 1
		}
		c.Spec.LeaseTransitions = &n
		got, err = r.leases.Update(ctx, c, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			r.log.V(1).Info("claiming a "+u.kind()+" failed", u.kv("error", err.Error())...)
		}
		return // another member was faster, or the cache lags: look again later
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.held[u] != nil || r.refused != nil {
		r.mu.Unlock()
		r.release(ctx, got)
		r.mu.Lock()
		return
	}
	bctx, cancel := context.WithCancel(ctx)
	h := &heldBucket{lease: got, renewed: start, since: start, ctx: bctx, cancel: cancel}
	r.held[u] = h
	r.log.Info("claimed "+u.kind(), u.kv("previous", Holder(l), "why", why)...)
	go r.acquire(u, h, r.participantsLocked(u))
}

// acquire makes every participant of u read it, then serves it.
func (r *Ring) acquire(u unit, h *heldBucket, parts []participant) {
	r.mu.RLock()
	l := h.lease // renewals replace it meanwhile
	r.mu.RUnlock()
	marks := r.leaseMarks(l)
	backoff := time.Second
	for _, p := range parts {
		// A controller that cannot read the bucket yet (a kind it may not
		// list, a sync that timed out) tries again: its informers recover
		// by themselves once they can, and the bucket stays unserved (and
		// the member unready) until then.
		for {
			restoreGC := syncgc.Bound(r.SyncHeapRatio)
			err := p.acquire(h.ctx, marks)
			restoreGC()
			if err == nil {
				break
			}
			if h.ctx.Err() != nil {
				return
			}
			r.log.Error(err, "reading a claimed "+u.kind()+" failed; trying again", u.kv("in", backoff)...)
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[u] != h || h.state == bucketDraining {
		return // lost or being handed over meanwhile
	}
	h.state = bucketServing
	for _, p := range parts {
		p.serve(h.ctx, true)
	}
	took := time.Since(h.since)
	r.metrics.Handovers.WithLabelValues(r.opts.Ring, "in").Inc()
	r.metrics.Durations.WithLabelValues(r.opts.Ring, "sync").Observe(took.Seconds())
	r.log.Info("serving "+u.kind(), u.kv("synced", took.Round(time.Millisecond))...)
	r.metrics.set(r.countLocked())
}

// handOver gives unit u up to owner ("" when no member found it): stop
// dispatching, drain, stop fencing writes in, drop, release the Lease.
func (r *Ring) handOver(ctx context.Context, u unit, h *heldBucket, owner string) {
	start := time.Now()
	r.mu.RLock()
	parts := r.participantsLocked(u)
	users := slices.Clone(r.users)
	r.mu.RUnlock()
	for _, p := range parts {
		p.serve(h.ctx, false)
	}
	var stuck []string
	for _, p := range parts {
		stuck = append(stuck, p.drain(r.opts.HandoverTimeout)...)
	}
	r.mu.Lock()
	if r.held[u] != h {
		r.mu.Unlock()
		return // lost meanwhile
	}
	delete(r.held, u) // from here on, the fence refuses u's writes
	h.cancel()
	lease := h.lease
	r.mu.Unlock()
	var marks map[string]string
	if !u.isCluster() {
		marks = userMarks([]int{u.b}, users)[u.b]
	}
	for _, p := range parts {
		p.drop(h.ctx)
	}
	r.release(ctx, r.withMarks(lease, marks))
	took := time.Since(start)
	r.metrics.Handovers.WithLabelValues(r.opts.Ring, "out").Inc()
	r.metrics.Durations.WithLabelValues(r.opts.Ring, "drain").Observe(took.Seconds())
	if len(stuck) > 0 {
		r.metrics.Abandoned.WithLabelValues(r.opts.Ring).Add(float64(len(stuck)))
		r.log.Info("handed a "+u.kind()+" over with reconciles still running; their writes are refused", u.kv("to", owner, "drained", took.Round(time.Millisecond), "abandoned", stuck)...)
	} else {
		r.log.Info("handed a "+u.kind()+" over", u.kv("to", owner, "drained", took.Round(time.Millisecond))...)
	}
	r.mu.Lock()
	r.metrics.set(r.countLocked())
	r.mu.Unlock()
}

// userMarks returns the marks of the buckets of bs, by bucket and then by
// controller, for the users that can say.
func userMarks(bs []int, users []User) map[int]map[string]string {
	marks := map[int]map[string]string{}
	for _, u := range users {
		ctl, rvs := u.Marks(bs)
		for b, rv := range rvs {
			if marks[b] == nil {
				marks[b] = map[string]string{}
			}
			marks[b][ctl] = rv
		}
	}
	return marks
}

// handoverMarks is the value of marksAnno. Layout says how the ring cut
// the hash space when the marks were taken ("32/uid"): a bucket of another
// layout holds other objects, so its marks say nothing of them.
type handoverMarks struct {
	Layout string            `json:"layout"`
	Marks  map[string]string `json:"marks"`
}

// leaseMarks returns the marks bucket Lease l carries, by controller; none
// when it carries none, of another layout, or they do not parse.
func (r *Ring) leaseMarks(l *coordinationv1.Lease) map[string]string {
	var m handoverMarks
	if v := l.Annotations[marksAnno]; v == "" || json.Unmarshal([]byte(v), &m) != nil || m.Layout != r.layout.Cut {
		return nil
	}
	return m.Marks
}

// withMarks returns a copy of bucket Lease l whose marks are marks, and,
// for controllers that left none, the ones l had.
func (r *Ring) withMarks(l *coordinationv1.Lease, marks map[string]string) *coordinationv1.Lease {
	if len(marks) == 0 {
		return l
	}
	all := r.leaseMarks(l)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, marks)
	v, err := json.Marshal(handoverMarks{Layout: r.layout.Cut, Marks: all})
	if err != nil {
		return l
	}
	c := l.DeepCopy()
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, marksAnno, string(v))
	return c
}
