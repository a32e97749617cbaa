package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/informers"
)

// ErrBucketNotHeld is wrapped by the errors of writes a sharded
// controller's reconcile makes after this process gave up, lost, or failed
// to renew the key's bucket: another member may reconcile the key now.
var ErrBucketNotHeld = errors.New("framework: this process no longer holds the object's bucket; its client no longer writes for it")

// Labels and annotations of a ring's Leases.
const (
	ringLabel   = "converge.dev/ring"
	roleLabel   = "converge.dev/ring-role"
	bucketLabel = "converge.dev/bucket"
	// marksAnno, on a bucket Lease, holds the marks its holder writes with
	// each renewal and when it gives the bucket up (handoverMarks): by
	// controller name, a resourceVersion below which every change of the
	// bucket's primary objects was reconciled (see shardedPrimary.marks).
	// The next holder queues the objects of its initial list at or above
	// its controller's mark as changes, the rest as replays. A mark stays
	// true once written (what was reconciled stays reconciled; only
	// restoring etcd from a backup, which sets resourceVersions back,
	// breaks that), so a holder that writes none (its controller could not
	// say) leaves the one it found.
	marksAnno        = "converge.dev/handover-marks"
	roleMember       = "member"
	roleBucket       = "bucket"
	ringReadyCheck   = "sharding"
	ringKickInterval = 50 * time.Millisecond
)

// RingStatus is a member's view of its sharding ring. The debug endpoint
// serves it as JSON too (DebugState.Ring).
type RingStatus struct {
	// Ring and Identity are the ring's name and this member's identity.
	Ring     string `json:"ring"`
	Identity string `json:"identity"`
	// Buckets is how the ring cuts objects into buckets: its shard key and
	// bucket count, as BucketFrom reports them.
	Buckets informers.Buckets `json:"buckets"`
	// Forming is set while no live member holds a bucket and this member
	// waits (ShardingOptions.FormationDelay) before claiming.
	Forming bool `json:"forming"`
	// Serving are the buckets whose keys this member dispatches: claimed,
	// and listed by every sharded controller. Syncing are claimed and still
	// listing; Draining are being given up, waiting for in-flight
	// reconciles.
	Serving  []int `json:"serving"`
	Syncing  []int `json:"syncing"`
	Draining []int `json:"draining"`
	// Members are the identities of the live members of this member's
	// layout it saw at its last look at the ring; itself included while
	// its member Lease was renewed within RenewDeadline and it is not
	// refused.
	Members []string `json:"members"`
	// Refused says why this member holds no bucket and is not ready: the
	// ring is held by members of another layout (another BucketCount, Key
	// or set of sharded controllers), which it names. The member keeps
	// trying, and joins once they are gone. Empty while not refused.
	Refused string `json:"refused,omitempty"`
}

// shardUser is a sharded controller, as the ring drives it.
type shardUser interface {
	// acquire starts reading bucket b and returns once the reads synced,
	// or with ctx's error. marks are those the bucket's last holders left,
	// by controller.
	acquire(ctx context.Context, b int, marks map[string]string) error
	// serve turns dispatching b's keys on or off. ctx is the context of
	// the holding of b it is for (the one acquire was given): a call for a
	// holding that ended, made once b was claimed again, does nothing.
	serve(ctx context.Context, b int, on bool)
	// drain waits, at most timeout, for b's in-flight reconciles; it
	// returns the keys of those still running.
	drain(b int, timeout time.Duration) []string
	// drop stops reading b for the holding of context ctx, as serve.
	drop(ctx context.Context, b int)
	// marks returns the controller's name and its marks of the buckets of
	// bs it can say for, by bucket (see shardedPrimary.marks).
	marks(bs []int) (controller string, rvs map[int]string)
	// describe names the controller and its kind, for the ring's layout:
	// "cms (ConfigMap)".
	describe() string
}

// bucketState is where a claimed bucket is in its life.
type bucketState int

const (
	bucketSyncing bucketState = iota
	bucketServing
	bucketDraining
)

// String is the state as ShardStatus.State names it.
func (s bucketState) String() string {
	return [...]string{bucketSyncing: "syncing", bucketServing: "serving", bucketDraining: "draining"}[s]
}

// heldBucket is a bucket this member claimed.
type heldBucket struct {
	lease *coordinationv1.Lease // as last written
	// renewed is when the last successful claim or renewal was sent.
	renewed time.Time
	state   bucketState
	since   time.Time // claimed at
	// ctx ends when the bucket is given up or lost; reconciles of its keys
	// are cancelled with it.
	ctx    context.Context
	cancel context.CancelFunc
}

// observation is when a Lease's resourceVersion was first seen.
type observation struct {
	rv string
	// since is when the Lease was last renewed at the latest, as this
	// member judges it (see backdate); at when it was seen.
	since, at time.Time
}

// ring is this process's membership of a sharding ring (see
// ShardingOptions).
type ring struct {
	opts    ShardingOptions
	buckets informers.Buckets
	leases  coordclient.LeaseInterface
	log     logr.Logger
	metrics *ringMetrics
	// syncGCPercent is Options.SyncGCPercent: the GOGC while a bucket's
	// reads first sync (see relaxGC).
	syncGCPercent int
	// memberName is the name of this member's Lease.
	memberName string
	// layout is this member's layout, set by start before the ring runs.
	layout ringLayout

	informer cache.SharedIndexInformer
	kick     chan struct{}
	// holds counts the sharded controllers reading each bucket informer.
	holds bucketHolds

	mu sync.RWMutex
	// users are the sharded controllers; mu guards every field below.
	users []shardUser
	// layoutRenewed is when the last successful write of the layout Lease
	// (recording layout) was sent; refused is set while the Lease records
	// another layout that live members hold.
	layoutRenewed time.Time
	refused       error
	// refusedBy is the layout that refused this member, while refused.
	refusedBy ringLayout
	// distrust is set once a Lease's renewal time showed its holder's
	// clock further behind this member's than MaxClockSkew allows: from
	// then on no Lease is judged by the time it carries.
	distrust bool
	member   *coordinationv1.Lease
	// memberRenewed is when the last successful renewal of the member
	// Lease was sent; lastRenew when the last round of renewals began.
	memberRenewed, lastRenew time.Time
	held                     map[int]*heldBucket
	seen                     map[string]observation
	members                  []string
	assessed                 bool
	// joined is when this member began to look at the ring; formed is set
	// once it saw a live member hold a bucket, or waited FormationDelay
	// after joined.
	joined time.Time
	formed bool
	// ignored names the member Leases of other layouts already logged.
	ignored map[string]bool
	stopped bool
}

func newRing(cs coordclient.LeasesGetter, opts ShardingOptions, log logr.Logger, metrics *ringMetrics) *ring {
	r := &ring{
		opts:       opts,
		buckets:    informers.Buckets{Key: opts.Key, Count: opts.BucketCount},
		leases:     cs.Leases(opts.Namespace),
		log:        log.WithValues("ring", opts.Ring, "identity", opts.Identity),
		metrics:    metrics,
		memberName: memberLeaseName(opts.Ring, opts.Identity),
		kick:       make(chan struct{}, 1),
		held:       map[int]*heldBucket{},
		seen:       map[string]observation{},
		ignored:    map[string]bool{},
	}
	sel := labels.SelectorFromSet(labels.Set{ringLabel: opts.Ring}).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return r.leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return r.leases.Watch(ctx, o)
		},
	}
	r.informer = cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	_, _ = r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.poke() },
		DeleteFunc: func(any) { r.poke() },
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*coordinationv1.Lease), newObj.(*coordinationv1.Lease)
			r.checkClock(o, n)
			switch {
			case n.Labels[roleLabel] == roleLayout:
				// Its holder is the member of its layout that renewed it
				// last, and changes every renewal.
				if layoutOf(o) != layoutOf(n) || holder(n) == "" {
					r.poke()
				}
			case holder(o) != holder(n) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil):
				r.poke()
			}
		},
	})
	return r
}

func memberLeaseName(ring, identity string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(identity))
	return fmt.Sprintf("%s-member-%08x", ring, h.Sum32())
}

func bucketLeaseName(ring string, b int) string { return fmt.Sprintf("%s-bucket-%d", ring, b) }

// newLease returns a Lease of the ring named name, of role, held by this
// member from now, recording its layout.
func (r *ring) newLease(name, role string, now time.Time) *coordinationv1.Lease {
	stamp := metav1.NewMicroTime(now)
	secs := int32(r.opts.LeaseDuration.Round(time.Second) / time.Second)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Namespace, Labels: map[string]string{ringLabel: r.opts.Ring, roleLabel: role}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &r.opts.Identity, LeaseDurationSeconds: &secs, AcquireTime: &stamp, RenewTime: &stamp},
	}
	r.layout.annotate(l)
	return l
}

// cachedLease returns the ring's Lease of that name as the informer
// shows it, nil for none.
func (r *ring) cachedLease(name string) *coordinationv1.Lease {
	obj, ok, _ := r.informer.GetStore().GetByKey(r.opts.Namespace + "/" + name)
	if !ok {
		return nil
	}
	l, _ := obj.(*coordinationv1.Lease)
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (r *ring) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// register adds a sharded controller; call before start.
func (r *ring) register(u shardUser) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.joined.IsZero() {
		return errShardedAfterStart
	}
	r.users = append(r.users, u)
	return nil
}

// errShardedAfterStart refuses a sharded controller built once the manager
// started: the ring has the buckets it claims read by the controllers it
// knows at the claim.
var errShardedAfterStart = errors.New("ControllerOptions.Sharded: the manager has started; build sharded controllers before Manager.Start")

// unregister removes a sharded controller whose build failed after
// register.
func (r *ring) unregister(u shardUser) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users = slices.DeleteFunc(r.users, func(v shardUser) bool { return v == u })
}

// start joins the ring and runs it until ctx ends; then call leave. A
// member of another layout than the ring's is not refused here but by the
// ring (see writeLayout), which it keeps trying to join.
func (r *ring) start(ctx context.Context) error {
	r.mu.Lock()
	r.layout = newLayout(fmt.Sprintf("%d/%s", r.opts.BucketCount, r.opts.Key), r.users)
	r.mu.Unlock()
	go r.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		return fmt.Errorf("framework: sharding ring %q: list its Leases in namespace %s: %w", r.opts.Ring, r.opts.Namespace, context.Cause(ctx))
	}
	r.log.Info("joining sharding ring", "layout", r.layout.String())
	go r.run(ctx)
	return nil
}

// compatible is nil when member Lease l records this member's layout.
func (r *ring) compatible(l *coordinationv1.Lease) error {
	if theirs := layoutOf(l); theirs != r.layout {
		return fmt.Errorf("member %q (Lease %s) has layout %s, this member (%q) has %s: every member of a ring needs the same Options.Sharding.BucketCount and Key and the same sharded controllers",
			holder(l), l.Name, theirs, r.opts.Identity, r.layout)
	}
	return nil
}

func (r *ring) ringLeases() []*coordinationv1.Lease {
	objs := r.informer.GetStore().List()
	out := make([]*coordinationv1.Lease, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*coordinationv1.Lease))
	}
	return out
}

func (r *ring) run(ctx context.Context) {
	tick := time.NewTicker(r.opts.RetryPeriod)
	defer tick.Stop()
	r.mu.Lock()
	r.joined = time.Now()
	r.mu.Unlock()
	if r.opts.FormationDelay > 0 {
		// Look again when the wait for a forming ring ends.
		formed := time.AfterFunc(r.opts.FormationDelay, r.poke)
		defer formed.Stop()
	}
	for {
		r.mu.RLock()
		due := time.Since(r.lastRenew) >= r.opts.RetryPeriod
		r.mu.RUnlock()
		if due {
			r.renew(ctx)
		}
		r.assess(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.kick:
			// Let a burst of Lease events settle into one look.
			select {
			case <-ctx.Done():
				return
			case <-time.After(ringKickInterval):
			}
		}
	}
}

// renew renews the member Lease, then every claimed bucket's Lease at
// once. A bucket whose Lease another member now holds is lost. The
// requests are sent without r.mu held: the write fence (check) reads under
// it.
func (r *ring) renew(ctx context.Context) {
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
func (r *ring) renewBucket(ctx context.Context, b int, l *coordinationv1.Lease, h *heldBucket) {
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
		case gerr == nil && holder(cur) == r.opts.Identity && layoutOf(cur) == r.layout:
			got = cur // renewed at the next round
			start = time.Time{}
		case gerr == nil && holder(cur) == r.opts.Identity:
			lost = "its Lease records another layout: " + layoutOf(cur).String()
		case gerr == nil:
			lost = "its Lease is held by " + strconv.Quote(holder(cur))
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
func (r *ring) writeMember(ctx context.Context, member *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	start := time.Now()
	if member == nil {
		got, err := r.leases.Create(ctx, r.newLease(r.memberName, roleMember, start), metav1.CreateOptions{})
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
	secs := int32(r.opts.LeaseDuration.Round(time.Second) / time.Second)
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &r.opts.Identity, &now, &secs
	r.layout.annotate(l) // an earlier run's may differ
	return r.leases.Update(ctx, l, metav1.UpdateOptions{})
}

// assess looks at the ring: which members are live, which buckets this
// member should hold; it claims the buckets it should hold that are free,
// and starts handing over those it should not.
func (r *ring) assess(ctx context.Context) {
	leases := r.ringLeases()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	now := time.Now()
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
	var members []string
	if r.member != nil && now.Sub(r.memberRenewed) < r.opts.RenewDeadline && r.refused == nil {
		members = append(members, r.opts.Identity)
	}
	for _, l := range leases {
		id := holder(l)
		if l.Labels[roleLabel] != roleMember || l.Name == r.memberName || id == "" || l.DeletionTimestamp != nil {
			continue
		}
		if now.Sub(r.seen[l.Name].since) >= r.opts.LeaseDuration {
			continue // not renewed for LeaseDuration: gone
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
	if !slices.Equal(members, r.members) {
		r.log.Info("ring members changed", "members", members, "before", r.members)
		r.members = members
	}
	r.assessed = true
	type claim struct {
		b     int
		lease *coordinationv1.Lease
		why   string
	}
	if !r.formed {
		r.formed = r.formingOverLocked(leases, members, now)
	}
	// Buckets are claimed only while this member holds the ring's layout
	// (see writeLayout): a member of another layout may then hold none.
	mayClaim := r.formed && r.refused == nil && now.Sub(r.layoutRenewed) < r.opts.RenewDeadline
	var claims []claim
	for b, owner := range assign(r.opts.BucketCount, members) {
		h := r.held[b]
		switch {
		case owner == r.opts.Identity && h == nil && mayClaim:
			l := byName[bucketLeaseName(r.opts.Ring, b)]
			if why := r.claimable(l, now); why != "" {
				claims = append(claims, claim{b, l, why})
			}
		case owner != r.opts.Identity && h != nil && h.state != bucketDraining:
			// A bucket still syncing goes too: its reads end with its
			// context, and one that cannot be read here (its acquire
			// retrying) is not kept from a member that may read it.
			h.state = bucketDraining
			go r.handOver(ctx, b, h, owner)
		}
	}
	r.metrics.set(r.countLocked())
	r.mu.Unlock()
	for _, c := range claims {
		r.claim(ctx, c.b, c.lease, c.why)
	}
	r.mu.Lock() // for the deferred unlock
}

// formingOverLocked reports whether this member may claim buckets: it has
// waited FormationDelay since it joined, or another live member (members)
// holds a bucket Lease it renewed within LeaseDuration (by the renewal
// time the Lease carries: a crashed member's Lease looks live to a member
// that just joined until it has watched it for LeaseDuration). Until then
// the ring is forming, and the members that join meanwhile are counted in
// the first claims. r.mu must be held.
func (r *ring) formingOverLocked(leases []*coordinationv1.Lease, members []string, now time.Time) bool {
	if now.Sub(r.joined) >= r.opts.FormationDelay {
		return true
	}
	for _, l := range leases {
		h := holder(l)
		if l.Labels[roleLabel] != roleBucket || h == r.opts.Identity || !slices.Contains(members, h) || r.claimable(l, now) != "" {
			continue
		}
		if l.Spec.RenewTime != nil && now.Sub(l.Spec.RenewTime.Time) < r.opts.LeaseDuration {
			return true
		}
	}
	r.log.V(1).Info("the ring is forming: waiting before claiming buckets", "members", members, "for", (r.opts.FormationDelay - now.Sub(r.joined)).Round(time.Millisecond))
	return false
}

// claimable says why bucket Lease l (nil when the bucket has none) may be
// claimed: "new", "released", or "expired" when this member saw it
// unchanged for LeaseDuration; "" when a live member holds it. r.mu must be
// held.
func (r *ring) claimable(l *coordinationv1.Lease, now time.Time) string {
	switch {
	case l == nil:
		return "new"
	case holder(l) == "":
		return "released"
	case now.Sub(r.seen[l.Name].since) >= r.opts.LeaseDuration:
		return "expired"
	}
	return ""
}

// assign gives each bucket an owner among members (sorted): the member
// ranking highest for it by rendezvous hashing, then, while a member owns
// more than ceil(buckets/members), the bucket of that member whose next
// choice under the limit ranks highest moves there. "" when there are no
// members. Every member computes the same assignment from the same
// members, and a member joining or leaving moves few buckets besides its
// own.
func assign(buckets int, members []string) []string {
	owners := make([]string, buckets)
	if len(members) == 0 {
		return owners
	}
	limit := (buckets + len(members) - 1) / len(members)
	ranked := make([][]string, buckets)
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

func score(member string, bucket int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0, byte(bucket >> 8), byte(bucket)})
	// FNV of inputs that differ in a byte or two orders them alike for
	// every bucket; splitmix64's finalizer spreads them.
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// claim claims bucket b, whose Lease was last seen as l (nil when it had
// none), with a compare-and-swap on that resourceVersion: it fails when
// the Lease changed since.
func (r *ring) claim(ctx context.Context, b int, l *coordinationv1.Lease, why string) {
	start := time.Now()
	stamp := metav1.NewMicroTime(start)
	secs := int32(r.opts.LeaseDuration.Round(time.Second) / time.Second)
	var (
		got *coordinationv1.Lease
		err error
	)
	if l == nil {
		nl := r.newLease(bucketLeaseName(r.opts.Ring, b), roleBucket, start)
		nl.Labels[bucketLabel] = strconv.Itoa(b)
		got, err = r.leases.Create(ctx, nl, metav1.CreateOptions{})
	} else {
		c := l.DeepCopy()
		r.layout.annotate(c)
		c.Spec.HolderIdentity, c.Spec.AcquireTime, c.Spec.RenewTime, c.Spec.LeaseDurationSeconds = &r.opts.Identity, &stamp, &stamp, &secs
		n := int32(1)
		if c.Spec.LeaseTransitions != nil {
			n = *c.Spec.LeaseTransitions + 1
		}
		c.Spec.LeaseTransitions = &n
		got, err = r.leases.Update(ctx, c, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			r.log.V(1).Info("claiming a bucket failed", "bucket", b, "error", err.Error())
		}
		return // another member was faster, or the cache lags: look again later
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.held[b] != nil || r.refused != nil {
		r.mu.Unlock()
		r.release(ctx, got)
		r.mu.Lock()
		return
	}
	bctx, cancel := context.WithCancel(ctx)
	h := &heldBucket{lease: got, renewed: start, since: start, ctx: bctx, cancel: cancel}
	r.held[b] = h
	r.log.Info("claimed bucket", "bucket", b, "previous", holder(l), "why", why)
	go r.acquire(b, h, slices.Clone(r.users))
}

// acquire makes every sharded controller read bucket b, then serves it.
func (r *ring) acquire(b int, h *heldBucket, users []shardUser) {
	marks := r.leaseMarks(h.lease)
	backoff := time.Second
	for _, u := range users {
		// A controller that cannot read the bucket yet (a kind it may not
		// list, a sync that timed out) tries again: its informers recover
		// by themselves once they can, and the bucket stays unserved (and
		// the member unready) until then.
		for {
			restoreGC := relaxGC(r.syncGCPercent)
			err := u.acquire(h.ctx, b, marks)
			restoreGC()
			if err == nil {
				break
			}
			if h.ctx.Err() != nil {
				return
			}
			r.log.Error(err, "reading a claimed bucket failed; trying again", "bucket", b, "in", backoff)
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
	if r.held[b] != h || h.state == bucketDraining {
		return // lost or being handed over meanwhile
	}
	h.state = bucketServing
	for _, u := range users {
		u.serve(h.ctx, b, true)
	}
	took := time.Since(h.since)
	r.metrics.handovers.WithLabelValues(r.opts.Ring, "in").Inc()
	r.metrics.durations.WithLabelValues(r.opts.Ring, "sync").Observe(took.Seconds())
	r.log.Info("serving bucket", "bucket", b, "synced", took.Round(time.Millisecond))
	r.metrics.set(r.countLocked())
}

// handOver gives bucket b up to owner: stop dispatching, drain, stop
// fencing writes in, release the Lease.
func (r *ring) handOver(ctx context.Context, b int, h *heldBucket, owner string) {
	start := time.Now()
	r.mu.RLock()
	users := slices.Clone(r.users)
	r.mu.RUnlock()
	for _, u := range users {
		u.serve(h.ctx, b, false)
	}
	var stuck []string
	for _, u := range users {
		stuck = append(stuck, u.drain(b, r.opts.HandoverTimeout)...)
	}
	r.mu.Lock()
	if r.held[b] != h {
		r.mu.Unlock()
		return // lost meanwhile
	}
	delete(r.held, b) // from here on, the fence refuses b's writes
	h.cancel()
	lease := h.lease
	r.mu.Unlock()
	marks := userMarks([]int{b}, users)[b]
	for _, u := range users {
		u.drop(h.ctx, b)
	}
	r.release(ctx, r.withMarks(lease, marks))
	took := time.Since(start)
	r.metrics.handovers.WithLabelValues(r.opts.Ring, "out").Inc()
	r.metrics.durations.WithLabelValues(r.opts.Ring, "drain").Observe(took.Seconds())
	if len(stuck) > 0 {
		r.metrics.abandoned.WithLabelValues(r.opts.Ring).Add(float64(len(stuck)))
		r.log.Info("handed a bucket over with reconciles still running; their writes are refused", "bucket", b, "to", owner, "drained", took.Round(time.Millisecond), "abandoned", stuck)
	} else {
		r.log.Info("handed a bucket over", "bucket", b, "to", owner, "drained", took.Round(time.Millisecond))
	}
	r.mu.Lock()
	r.metrics.set(r.countLocked())
	r.mu.Unlock()
}

// userMarks returns the marks of the buckets of bs, by bucket and then by
// controller, for the users that can say.
func userMarks(bs []int, users []shardUser) map[int]map[string]string {
	marks := map[int]map[string]string{}
	for _, u := range users {
		ctl, rvs := u.marks(bs)
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
func (r *ring) leaseMarks(l *coordinationv1.Lease) map[string]string {
	var m handoverMarks
	if v := l.Annotations[marksAnno]; v == "" || json.Unmarshal([]byte(v), &m) != nil || m.Layout != r.layout.cut {
		return nil
	}
	return m.Marks
}

// withMarks returns a copy of bucket Lease l whose marks are marks, and,
// for controllers that left none, the ones l had.
func (r *ring) withMarks(l *coordinationv1.Lease, marks map[string]string) *coordinationv1.Lease {
	if len(marks) == 0 {
		return l
	}
	all := r.leaseMarks(l)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, marks)
	v, err := json.Marshal(handoverMarks{Layout: r.layout.cut, Marks: all})
	if err != nil {
		return l
	}
	c := l.DeepCopy()
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, marksAnno, string(v))
	return c
}

// release clears the holder of bucket Lease l, if this member still holds
// it, and writes l's annotations with it (the marks withMarks set).
func (r *ring) release(ctx context.Context, l *coordinationv1.Lease) {
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
		if err != nil || holder(cur) != r.opts.Identity {
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
func (r *ring) loseLocked(b int, why string) {
	h := r.held[b]
	if h == nil {
		return
	}
	delete(r.held, b)
	h.cancel()
	users := slices.Clone(r.users)
	r.metrics.handovers.WithLabelValues(r.opts.Ring, "lost").Inc()
	r.log.Info("lost bucket: cancelling its reconciles", "bucket", b, "why", why)
	go func() {
		for _, u := range users {
			u.serve(h.ctx, b, false)
			u.drop(h.ctx, b)
		}
	}()
}

// leave releases every bucket and deletes the member Lease, so that the
// other members take the buckets over at once. Call it once the sharded
// controllers stopped.
func (r *ring) leave(ctx context.Context) {
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

// check is nil while this member holds bucket b and renewed it within
// RenewDeadline; otherwise an error wrapping ErrBucketNotHeld.
func (r *ring) check(b int) error {
	r.mu.RLock()
	h := r.held[b]
	var renewed time.Time
	if h != nil {
		renewed = h.renewed
		if r.layoutRenewed.Before(renewed) {
			renewed = r.layoutRenewed
		}
	}
	r.mu.RUnlock()
	if h == nil {
		return fmt.Errorf("%w (bucket %d of ring %s/%s)", ErrBucketNotHeld, b, r.opts.Namespace, r.opts.Ring)
	}
	if ago := time.Since(renewed); ago >= r.opts.RenewDeadline {
		return fmt.Errorf("%w (bucket %d of ring %s/%s: last renewed %v ago, RenewDeadline %v)", ErrBucketNotHeld, b, r.opts.Namespace, r.opts.Ring, ago.Round(time.Millisecond), r.opts.RenewDeadline)
	}
	return nil
}

// bucketContext returns the context of claimed bucket b, nil when not
// claimed.
func (r *ring) bucketContext(b int) context.Context {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h := r.held[b]; h != nil {
		return h.ctx
	}
	return nil
}

// ready is nil once the ring was assessed, has formed, and no claimed
// bucket is still syncing.
func (r *ring) ready() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.refused != nil {
		return r.refused
	}
	if !r.assessed {
		return fmt.Errorf("sharding ring %q: not joined yet", r.opts.Ring)
	}
	if !r.formed {
		return fmt.Errorf("sharding ring %q: forming, waiting %v more before claiming buckets (FormationDelay)", r.opts.Ring, (r.opts.FormationDelay - time.Since(r.joined)).Round(time.Millisecond))
	}
	var syncing []int
	for b, h := range r.held {
		if h.state == bucketSyncing {
			syncing = append(syncing, b)
		}
	}
	if len(syncing) > 0 {
		slices.Sort(syncing)
		return fmt.Errorf("sharding ring %q: buckets %v still syncing", r.opts.Ring, syncing)
	}
	return nil
}

// bucketStatus returns this member's hold of bucket b ("serving",
// "syncing", "draining" or "" when it holds none), and the holder of b's
// Lease when another live member holds it.
func (r *ring) bucketStatus(b int) (state, holderID string) {
	var l *coordinationv1.Lease
	if obj, ok, _ := r.informer.GetStore().GetByKey(r.opts.Namespace + "/" + bucketLeaseName(r.opts.Ring, b)); ok {
		l, _ = obj.(*coordinationv1.Lease)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h := r.held[b]; h != nil {
		return h.state.String(), ""
	}
	if l != nil && holder(l) != r.opts.Identity && r.claimable(l, time.Now()) == "" {
		return "", holder(l)
	}
	return "", ""
}

// status reports the ring as this member sees it.
func (r *ring) status() RingStatus {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := RingStatus{Ring: r.opts.Ring, Identity: r.opts.Identity, Buckets: r.buckets, Forming: r.assessed && !r.formed, Members: slices.Clone(r.members)}
	if r.refused != nil {
		s.Refused = r.refused.Error()
	}
	for b, h := range r.held {
		switch h.state {
		case bucketServing:
			s.Serving = append(s.Serving, b)
		case bucketSyncing:
			s.Syncing = append(s.Syncing, b)
		default:
			s.Draining = append(s.Draining, b)
		}
	}
	for _, l := range [][]int{s.Serving, s.Syncing, s.Draining} {
		slices.Sort(l)
	}
	return s
}

// countLocked counts claimed buckets by state. r.mu must be held.
func (r *ring) countLocked() [3]int {
	var n [3]int
	for _, h := range r.held {
		n[h.state]++
	}
	return n
}
