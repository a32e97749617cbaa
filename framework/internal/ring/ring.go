package ring

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/framework/internal/fence"
	"github.com/converge-dev/converge/sharding"
)

// Labels and annotations of a ring's Leases.
const (
	RingLabel   = "converge.dev/ring"
	RoleLabel   = "converge.dev/ring-role"
	BucketLabel = "converge.dev/bucket"
	// marksAnno, on a bucket Lease, holds the marks its holder writes with
	// each renewal and when it gives the bucket up (handoverMarks): by
	// controller name, a resourceVersion below which every change of the
	// bucket's primary objects was reconciled (see shard.Primary.Marks).
	// The next holder queues the objects of its initial list at or above
	// its controller's mark as changes, the rest as replays. A mark stays
	// true once written (what was reconciled stays reconciled; only
	// restoring etcd from a backup, which sets resourceVersions back,
	// breaks that), so a holder that writes none (its controller could not
	// say) leaves the one it found.
	marksAnno        = "converge.dev/handover-marks"
	RoleMember       = "member"
	RoleBucket       = "bucket"
	ReadyCheck       = "sharding"
	ringKickInterval = 50 * time.Millisecond
)

// User is a sharded controller, as the ring drives it.
type User interface {
	// Acquire starts reading bucket b and returns once the reads synced,
	// or with ctx's error. marks are those the bucket's last holders left,
	// by controller.
	Acquire(ctx context.Context, b int, marks map[string]string) error
	// Serve turns dispatching b's keys on or off. ctx is the context of
	// the holding of b it is for (the one acquire was given): a call for a
	// holding that ended, made once b was claimed again, does nothing.
	Serve(ctx context.Context, b int, on bool)
	// Drain waits, at most timeout, for b's in-flight reconciles; it
	// returns the keys of those still running.
	Drain(b int, timeout time.Duration) []string
	// Drop stops reading b for the holding of context ctx, as Serve.
	Drop(ctx context.Context, b int)
	// Marks returns the controller's name and its marks of the buckets of
	// bs it can say for, by bucket (see shard.Primary.Marks).
	Marks(bs []int) (controller string, rvs map[int]string)
	// Describe names the controller and its kind, for the ring's layout:
	// "cms (ConfigMap)".
	Describe() string
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

// Ring is this process's membership of a sharding ring (see
// sharding.Options).
type Ring struct {
	opts    sharding.Options
	buckets sharding.Buckets
	leases  coordclient.LeaseInterface
	log     logr.Logger
	metrics *Metrics
	// SyncHeapRatio is Options.SyncHeapRatio: the heap bound while a
	// bucket's reads first sync (see syncgc.Bound), and, taken by the
	// ClusterUser, while a cluster's informers first sync. Set it before
	// Start.
	SyncHeapRatio float64
	// Elects is Options.LeaderElection.Enabled: whether the manager's own
	// cluster is served by the elected leader alone or by every member.
	// With clusters spread, it is part of the layout (see unitsOf); the
	// refusal says the member does not campaign (see Campaign). Set it
	// before Start.
	Elects bool
	// memberName is the name of this member's Lease.
	memberName string
	// layout is this member's layout, set by start before the ring runs.
	layout Layout

	informer cache.SharedIndexInformer
	kick     chan struct{}

	mu sync.RWMutex
	// users are the sharded controllers; mu guards every field below.
	users []User
	// layoutRenewed is when the last successful write of the layout Lease
	// (recording layout) was sent; refused is set while the Lease records
	// another layout that live members hold.
	layoutRenewed time.Time
	refused       error
	// refusedBy is the layout that refused this member, while refused.
	refusedBy Layout
	// changed is closed, and replaced, when this member comes to hold the
	// ring's layout or is refused (see Accepted).
	changed chan struct{}
	// distrust is set once a Lease's renewal time showed its holder's
	// clock further behind this member's than MaxClockSkew allows: from
	// then on no Lease is judged by the time it carries.
	distrust bool
	member   *coordinationv1.Lease
	// memberRenewed is when the last successful renewal of the member
	// Lease was sent; lastRenew when the last round of renewals began.
	memberRenewed, lastRenew time.Time
	held                     map[unit]*heldBucket
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
	// spread finds the clusters spread over the ring, nil when it spreads
	// none (SpreadClusters). unseen is when each cluster found without a
	// Lease was first found so; seenCount how many were found and
	// disagree the live members that found others, at the last look.
	spread    ClusterUser
	unseen    map[string]time.Time
	seenCount int
	disagree  []string
	// deleting names the Leases of clusters no member found that a
	// deleteLease is under way for.
	deleting map[string]bool
}

func New(cs coordclient.LeasesGetter, opts sharding.Options, log logr.Logger, metrics *Metrics) *Ring {
	r := &Ring{
		opts:       opts,
		buckets:    opts.Buckets,
		leases:     cs.Leases(opts.Lease.Namespace),
		log:        log.WithValues("ring", opts.Ring, "identity", opts.Lease.Identity),
		metrics:    metrics,
		memberName: MemberLeaseName(opts.Ring, opts.Lease.Identity),
		kick:       make(chan struct{}, 1),
		changed:    make(chan struct{}),
		held:       map[unit]*heldBucket{},
		unseen:     map[string]time.Time{},
		deleting:   map[string]bool{},
		seen:       map[string]observation{},
		ignored:    map[string]bool{},
	}
	sel := labels.SelectorFromSet(labels.Set{RingLabel: opts.Ring}).String()
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
			case n.Labels[RoleLabel] == RoleLayout:
				// Its holder is the member of its layout that renewed it
				// last, and changes every renewal.
				if LayoutOf(o) != LayoutOf(n) || Holder(n) == "" {
					r.poke()
				}
			case Holder(o) != Holder(n) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || o.Annotations[seenAnno] != n.Annotations[seenAnno]:
				r.poke()
			}
		},
	})
	return r
}

func MemberLeaseName(ring, identity string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(identity))
	return fmt.Sprintf("%s-member-%08x", ring, h.Sum32())
}

func BucketLeaseName(ring string, b int) string { return fmt.Sprintf("%s-bucket-%d", ring, b) }

// newLease returns a Lease of the ring named name, of role, held by this
// member from now, recording its layout.
func (r *Ring) newLease(name, role string, now time.Time) *coordinationv1.Lease {
	stamp := metav1.NewMicroTime(now)
	secs := int32(r.opts.Lease.Duration.Round(time.Second) / time.Second)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Lease.Namespace, Labels: map[string]string{RingLabel: r.opts.Ring, RoleLabel: role}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &r.opts.Lease.Identity, LeaseDurationSeconds: &secs, AcquireTime: &stamp, RenewTime: &stamp},
	}
	r.layout.Annotate(l)
	return l
}

// CachedLease returns the ring's Lease of that name as the informer
// shows it, nil for none.
func (r *Ring) CachedLease(name string) *coordinationv1.Lease {
	obj, ok, _ := r.informer.GetStore().GetByKey(r.opts.Lease.Namespace + "/" + name)
	if !ok {
		return nil
	}
	l, _ := obj.(*coordinationv1.Lease)
	return l
}

func Holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (r *Ring) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Layout is this member's layout, set by Start.
func (r *Ring) Layout() Layout {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.layout
}

// Users are the sharded controllers registered, in order.
func (r *Ring) Users() []User {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.users)
}

// Options are the ring's options, as New was given them.
func (r *Ring) Options() sharding.Options { return r.opts }

// Register adds a sharded controller; call before Start.
func (r *Ring) Register(u User) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.joined.IsZero() {
		return ErrStarted
	}
	r.users = append(r.users, u)
	return nil
}

// ErrStarted refuses a sharded controller built once the manager
// started: the ring has the buckets it claims read by the controllers it
// knows at the claim.
var ErrStarted = errors.New("ControllerOptions.Sharded: the manager has started; build sharded controllers before Manager.Start")

// Unregister removes a sharded controller whose build failed after
// register.
func (r *Ring) Unregister(u User) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users = slices.DeleteFunc(r.users, func(v User) bool { return v == u })
}

// Start joins the ring and runs it until ctx ends; then call Leave. A
// member of another layout than the ring's is not refused here but by the
// ring (see writeLayout), which it keeps trying to join.
func (r *Ring) Start(ctx context.Context) error {
	r.mu.Lock()
	cut := fmt.Sprintf("%d/%s", r.opts.Buckets.Count, r.opts.Buckets.By)
	if len(r.users) == 0 {
		// Buckets serve sharded controllers only: a ring without one (it
		// spreads clusters, or nothing) claims none.
		cut, r.buckets = NoBuckets, sharding.Buckets{}
	}
	r.layout = newLayout(cut, r.users, unitsOf(r.spread, r.Elects))
	r.mu.Unlock()
	go r.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		return fmt.Errorf("framework: sharding ring %q: list its Leases in namespace %s: %w", r.opts.Ring, r.opts.Lease.Namespace, context.Cause(ctx))
	}
	r.log.Info("joining sharding ring", "layout", r.layout.String())
	go r.run(ctx)
	return nil
}

// compatible is nil when member Lease l records this member's layout.
func (r *Ring) compatible(l *coordinationv1.Lease) error {
	if theirs := LayoutOf(l); theirs != r.layout {
		return fmt.Errorf("member %q (Lease %s) has layout %s, this member (%q) has %s: every member of a ring needs the same Options.Sharding.Buckets (Count and By), the same sharded controllers, and the same Options.Sharding.Clusters and providers",
			Holder(l), l.Name, theirs, r.opts.Lease.Identity, r.layout)
	}
	return nil
}

func (r *Ring) ringLeases() []*coordinationv1.Lease {
	objs := r.informer.GetStore().List()
	out := make([]*coordinationv1.Lease, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*coordinationv1.Lease))
	}
	return out
}

func (r *Ring) run(ctx context.Context) {
	tick := time.NewTicker(r.opts.Lease.RetryPeriod)
	defer tick.Stop()
	r.mu.Lock()
	r.joined = time.Now()
	r.mu.Unlock()
	if r.opts.FormationDelay > 0 {
		// Look again when the wait for a forming ring ends.
		formed := time.AfterFunc(r.opts.FormationDelay, r.poke)
		defer formed.Stop()
	}
	ticked := false
	for {
		if r.renewDue(ticked, time.Now()) {
			r.renew(ctx)
		}
		r.assess(ctx)
		ticked = false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			ticked = true
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

// renewDue says whether the round of renewals is due at now: at each
// tick of RetryPeriod (ticked), unless a round began within half of it
// (a look woken by a Lease's change renewed late), and at any other look
// once a round is RetryPeriod late. A tick comes RetryPeriod after the
// previous one, a hair less after the round it began: asking there for a
// whole RetryPeriod since the round skipped every other tick, and renewed
// every 2 × RetryPeriod.
func (r *Ring) renewDue(ticked bool, now time.Time) bool {
	r.mu.RLock()
	since := now.Sub(r.lastRenew)
	r.mu.RUnlock()
	if ticked {
		return since >= r.opts.Lease.RetryPeriod/2
	}
	return since >= r.opts.Lease.RetryPeriod
}

// Check is nil while this member holds bucket b and renewed it within
// RenewDeadline; otherwise an error wrapping sharding.ErrBucketNotHeld.
func (r *Ring) Check(b int) error { return r.check(bucketUnit(b)) }

// check is nil while this member holds u and renewed it within
// RenewDeadline; otherwise an error wrapping u's notHeld.
func (r *Ring) check(u unit) error {
	r.mu.RLock()
	h := r.held[u]
	var renewed time.Time
	if h != nil {
		renewed = r.renewedLocked(h)
	}
	r.mu.RUnlock()
	if h == nil {
		return fmt.Errorf("%w (%s of ring %s/%s)", u.notHeld(), u, r.opts.Lease.Namespace, r.opts.Ring)
	}
	if now := time.Now(); r.lapsed(renewed, now) {
		return fmt.Errorf("%w (%s of ring %s/%s: last renewed %v ago, RenewDeadline %v)", u.notHeld(), u, r.opts.Lease.Namespace, r.opts.Ring, now.Sub(renewed).Round(time.Millisecond), r.opts.Lease.RenewDeadline)
	}
	return nil
}

// renewedLocked is when claimed bucket h was last renewed as far as its
// fence goes: the older of its own Lease's renewal and the layout Lease's.
// r.mu must be held.
func (r *Ring) renewedLocked(h *heldBucket) time.Time {
	if r.layoutRenewed.Before(h.renewed) {
		return r.layoutRenewed
	}
	return h.renewed
}

// lapsed says whether a bucket last renewed at renewed is fenced at now:
// not renewed within Lease.RenewDeadline (fence.Lapsed).
func (r *Ring) lapsed(renewed, now time.Time) bool {
	return fence.Lapsed(renewed, now, r.opts.Lease.RenewDeadline)
}

// BucketContext returns the context of claimed bucket b, nil when not
// claimed.
func (r *Ring) BucketContext(b int) context.Context {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h := r.held[bucketUnit(b)]; h != nil {
		return h.ctx
	}
	return nil
}

// Ready is nil once the ring was assessed, has formed, and no claimed
// bucket is still syncing.
func (r *Ring) Ready() error {
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
	var syncing, fenced []int
	var fencedClusters []string
	now := time.Now()
	for u, h := range r.held {
		switch {
		case r.lapsed(r.renewedLocked(h), now) && u.isCluster():
			fencedClusters = append(fencedClusters, u.c)
		case r.lapsed(r.renewedLocked(h), now):
			fenced = append(fenced, u.b)
		case h.state == bucketSyncing && !u.isCluster():
			// A cluster still syncing does not hold readiness up: only
			// the manager's own cluster does.
			syncing = append(syncing, u.b)
		}
	}
	if len(fencedClusters) > 0 {
		slices.Sort(fencedClusters)
		return fmt.Errorf("sharding ring %q: clusters %q not renewed within RenewDeadline %v (API server unreachable?): their keys wait and their writes are refused", r.opts.Ring, fencedClusters, r.opts.Lease.RenewDeadline)
	}
	if len(fenced) > 0 {
		slices.Sort(fenced)
		return fmt.Errorf("sharding ring %q: buckets %v not renewed within RenewDeadline %v (API server unreachable?): their keys wait and their writes are refused", r.opts.Ring, fenced, r.opts.Lease.RenewDeadline)
	}
	if len(syncing) > 0 {
		slices.Sort(syncing)
		return fmt.Errorf("sharding ring %q: buckets %v still syncing", r.opts.Ring, syncing)
	}
	return nil
}

// BucketStatus returns this member's hold of bucket b ("serving",
// "syncing", "draining" or "" when it holds none), and the holder of b's
// Lease when another live member holds it.
func (r *Ring) BucketStatus(b int) (state, holderID string) {
	var l *coordinationv1.Lease
	if obj, ok, _ := r.informer.GetStore().GetByKey(r.opts.Lease.Namespace + "/" + BucketLeaseName(r.opts.Ring, b)); ok {
		l, _ = obj.(*coordinationv1.Lease)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h := r.held[bucketUnit(b)]; h != nil {
		return h.state.String(), ""
	}
	if l != nil && Holder(l) != r.opts.Lease.Identity && r.claimable(l, time.Now()) == "" {
		return "", Holder(l)
	}
	return "", ""
}

// Status reports the ring as this member sees it.
func (r *Ring) Status() sharding.Status {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := sharding.Status{Ring: r.opts.Ring, Identity: r.opts.Lease.Identity, Buckets: r.buckets, Forming: r.assessed && !r.formed, Members: slices.Clone(r.members)}
	if r.refused != nil {
		s.Refused = r.refused.Error()
	}
	now := time.Now()
	s.Clusters = r.clusterStatusLocked(now)
	for u, h := range r.held {
		b := u.b
		if u.isCluster() {
			continue
		}
		if r.lapsed(r.renewedLocked(h), now) {
			s.Fenced = append(s.Fenced, b)
			continue
		}
		switch h.state {
		case bucketServing:
			s.Serving = append(s.Serving, b)
		case bucketSyncing:
			s.Syncing = append(s.Syncing, b)
		default:
			s.Draining = append(s.Draining, b)
		}
	}
	for _, l := range [][]int{s.Serving, s.Syncing, s.Draining, s.Fenced} {
		slices.Sort(l)
	}
	return s
}

// countLocked counts claimed buckets, then clusters, by state. r.mu must
// be held.
func (r *Ring) countLocked() (buckets, clusters [3]int) {
	for u, h := range r.held {
		if u.isCluster() {
			clusters[h.state]++
		} else {
			buckets[h.state]++
		}
	}
	return buckets, clusters
}
