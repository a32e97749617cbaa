package ring

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/converge-dev/converge/sharding"
)

// Labels, role and annotation of the Leases of clusters spread over the
// ring (SpreadClusters).
const (
	// ClusterLabel, on a cluster's Lease, names the cluster: a Lease name
	// holds it too, but "c/x" could not be a label value.
	ClusterLabel = "converge.dev/cluster"
	RoleCluster  = "cluster"
	// seenAnno, on a member Lease, records which clusters the member's
	// providers found: "<count>/<FNV-64 of the sorted names>" (viewDigest).
	seenAnno = "converge.dev/clusters-seen"
)

// unit is what the ring hands out: bucket b of the hash space (c ""), or
// the whole cluster c (b -1). It is comparable, the key of Ring.held.
type unit struct {
	b int
	c string
}

func bucketUnit(b int) unit        { return unit{b: b} }
func clusterUnit(name string) unit { return unit{b: -1, c: name} }
func (u unit) isCluster() bool     { return u.c != "" }

// kind and value name u in logs: "bucket", 3 or "cluster", "edge-1".
func (u unit) kind() string {
	if u.isCluster() {
		return "cluster"
	}
	return "bucket"
}

func (u unit) value() any {
	if u.isCluster() {
		return u.c
	}
	return u.b
}

// kv is u as key and value of a log line, then kvs.
func (u unit) kv(kvs ...any) []any { return append([]any{u.kind(), u.value()}, kvs...) }

func (u unit) String() string { return fmt.Sprintf("%s %v", u.kind(), u.value()) }

// notHeld is the error the fence of a unit not held wraps.
func (u unit) notHeld() error {
	if u.isCluster() {
		return sharding.ErrClusterNotHeld
	}
	return sharding.ErrBucketNotHeld
}

// role is the RoleLabel of u's Lease.
func (u unit) role() string {
	if u.isCluster() {
		return RoleCluster
	}
	return RoleBucket
}

func (r *Ring) unitLease(u unit) string { return unitLeaseName(r.opts.Ring, u) }

func unitLeaseName(ring string, u unit) string {
	if u.isCluster() {
		return ClusterLeaseName(ring, u.c)
	}
	return BucketLeaseName(ring, u.b)
}

// ClusterLeaseName is the name of the Lease of cluster name of ring:
// "<ring>.c.<name>". Ring names and cluster names are DNS labels, and no
// other Lease of any ring has a dot in its name, so it names no bucket,
// member or layout Lease of any ring.
func ClusterLeaseName(ring, name string) string { return ring + ".c." + name }

// ClusterUser is what spreads whole clusters over the ring: it says which
// clusters the providers found, and engages and disengages the ones the
// ring gives this member.
type ClusterUser interface {
	// Clusters returns the names of the clusters the providers found,
	// sorted. It must not call the ring.
	Clusters() []string
	// Acquire engages the cluster named name and returns once it is
	// engaged and read by every controller that watches it, or with ctx's
	// error. ctx is the holding's context, which ends when the ring gives
	// the cluster up or loses it. The ring does not bound the heap around
	// it (SyncHeapRatio): an engagement may wait long for an API server
	// that does not answer, so Acquire bounds the informers' sync only.
	Acquire(ctx context.Context, name string) error
	// Serve turns dispatching the cluster's keys on or off, for the
	// holding of context ctx, as User.Serve.
	Serve(ctx context.Context, name string, on bool)
	// Drain waits, at most timeout, for the cluster's in-flight
	// reconciles; it returns the controllers of those still running.
	Drain(name string, timeout time.Duration) []string
	// Drop disengages the cluster for the holding of context ctx, as
	// User.Drop.
	Drop(ctx context.Context, name string)
	// Describe says how the clusters are found, for the ring's layout:
	// "namespaces(labels: spread=a)".
	Describe() string
}

// participant is one of the parties that read and serve a unit: a User
// for a bucket, the ClusterUser for a cluster.
type participant interface {
	acquire(ctx context.Context, marks map[string]string) error
	serve(ctx context.Context, on bool)
	drain(timeout time.Duration) []string
	drop(ctx context.Context)
}

type bucketPart struct {
	u User
	b int
}

func (p bucketPart) acquire(ctx context.Context, m map[string]string) error {
	return p.u.Acquire(ctx, p.b, m)
}
func (p bucketPart) serve(ctx context.Context, on bool) { p.u.Serve(ctx, p.b, on) }
func (p bucketPart) drain(t time.Duration) []string     { return p.u.Drain(p.b, t) }
func (p bucketPart) drop(ctx context.Context)           { p.u.Drop(ctx, p.b) }

type clusterPart struct {
	u    ClusterUser
	name string
}

func (p clusterPart) acquire(ctx context.Context, _ map[string]string) error {
	return p.u.Acquire(ctx, p.name)
}
func (p clusterPart) serve(ctx context.Context, on bool) { p.u.Serve(ctx, p.name, on) }
func (p clusterPart) drain(t time.Duration) []string     { return p.u.Drain(p.name, t) }
func (p clusterPart) drop(ctx context.Context)           { p.u.Drop(ctx, p.name) }

// participantsLocked returns the parties of unit u. r.mu must be held.
func (r *Ring) participantsLocked(u unit) []participant {
	if u.isCluster() {
		if r.spread == nil {
			return nil
		}
		return []participant{clusterPart{r.spread, u.c}}
	}
	ps := make([]participant, 0, len(r.users))
	for _, usr := range r.users {
		ps = append(ps, bucketPart{usr, u.b})
	}
	return ps
}

// SpreadClusters makes the ring spread the clusters u finds over its
// members; call before Start. The layout then records u.Describe.
func (r *Ring) SpreadClusters(u ClusterUser) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.joined.IsZero() {
		return errors.New("framework: sharding ring: clusters must be spread before the ring starts")
	}
	r.spread = u
	return nil
}

// Poke makes the ring look again soon: the clusters found changed.
func (r *Ring) Poke() { r.poke() }

// CheckCluster is nil while this member holds the cluster named name and
// renewed it within RenewDeadline; otherwise an error wrapping
// sharding.ErrClusterNotHeld.
func (r *Ring) CheckCluster(name string) error { return r.check(clusterUnit(name)) }

// ClusterContext returns the context of the holding of the cluster named
// name, nil when not held.
func (r *Ring) ClusterContext(name string) context.Context {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h := r.held[clusterUnit(name)]; h != nil {
		return h.ctx
	}
	return nil
}

// clusterView returns the clusters the ClusterUser found, nil when the
// ring spreads none. It takes no lock of the ring's.
func (r *Ring) clusterView() []string {
	r.mu.RLock()
	u := r.spread
	r.mu.RUnlock()
	if u == nil {
		return nil
	}
	return u.Clusters()
}

// viewDigest sums up a set of cluster names for seenAnno.
func viewDigest(names []string) string {
	h := fnv.New64a()
	for _, n := range names {
		_, _ = h.Write([]byte(n))
		_, _ = h.Write([]byte{0})
	}
	return fmt.Sprintf("%d/%016x", len(names), h.Sum64())
}

// AssignClusters gives each of the clusters names an owner among members
// (sorted), as Assign gives buckets (rendezvous hashing on the name, then
// at most ceil(clusters/members) each), then at least floor(clusters/members)
// each. "" when there are no members.
func AssignClusters(names []string, members []string) []string {
	return assignBy(len(names), func(m string, i int) uint64 { return scoreString(m, names[i]) }, members, true)
}

// scoreString ranks member for the unit named name, as score for a
// bucket.
func scoreString(member, name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(name))
	return mix(h.Sum64())
}

// disagreeingLocked returns the live members (members) other than this
// one whose member Lease (in byName) does not record digest as the
// clusters they found. r.mu must be held.
func (r *Ring) disagreeingLocked(byName map[string]*coordinationv1.Lease, members []string, digest string) []string {
	var out []string
	for _, m := range members {
		if m == r.opts.Lease.Identity {
			continue
		}
		if l := byName[MemberLeaseName(r.opts.Ring, m)]; l == nil || l.Annotations[seenAnno] != digest {
			out = append(out, m)
		}
	}
	return out
}

// rebalanceClustersLocked does for the clusters of view (the ones this
// member's providers found) what rebalanceLocked does for buckets, and
// returns the clusters this member may claim now. A held cluster moves to
// its new owner only while every live member found the same clusters (a
// member that lacks one would count other owners); one that left view is
// given up at once. A cluster whose Lease was free for Lease.Duration is
// claimed by any member that found it (its owner may not have), and moved
// once the views agree. r.mu must be held.
func (r *Ring) rebalanceClustersLocked(ctx context.Context, byName map[string]*coordinationv1.Lease, members, view []string, mayClaim bool, now time.Time) []unitClaim {
	if r.spread == nil {
		return nil
	}
	r.disagree = r.disagreeingLocked(byName, members, viewDigest(view))
	agreed := len(r.disagree) == 0
	owners := AssignClusters(view, members)
	found := make(map[string]bool, len(view))
	var claims []unitClaim
	for i, x := range view {
		found[x] = true
		u := clusterUnit(x)
		h, l := r.held[u], byName[r.unitLease(u)]
		if l != nil {
			delete(r.unseen, x)
		} else if _, ok := r.unseen[x]; !ok {
			r.unseen[x] = now
		}
		switch mine := owners[i] == r.opts.Lease.Identity; {
		case h == nil && mayClaim:
			why := r.claimable(l, now)
			if !mine && why != "" {
				why = r.orphanLocked(x, l, why, now)
			}
			if why != "" {
				claims = append(claims, unitClaim{u, l, why})
			}
		case !mine && h != nil && h.state != bucketDraining && agreed:
			h.state = bucketDraining
			go r.handOver(ctx, u, h, owners[i])
		}
	}
	for x := range r.unseen {
		if !found[x] {
			delete(r.unseen, x)
		}
	}
	for u, h := range r.held {
		if u.isCluster() && !found[u.c] && h.state != bucketDraining {
			h.state = bucketDraining
			go r.handOver(ctx, u, h, "")
		}
	}
	if agreed {
		r.deleteGoneLocked(ctx, byName, found, now)
	}
	return claims
}

// orphanLocked says why the cluster named x, whose Lease l another member
// should claim (why says how), may be claimed here: its Lease was free for
// Lease.Duration. "" when not. A held Lease is free once it expired,
// Lease.Duration after it last changed: at its expiry only its owner
// claims it. r.mu must be held.
func (r *Ring) orphanLocked(x string, l *coordinationv1.Lease, why string, now time.Time) string {
	free := r.unseen[x]
	if l != nil {
		free = r.seen[l.Name].since
		if Holder(l) != "" {
			free = free.Add(r.opts.Lease.Duration)
		}
	}
	if now.Sub(free) < r.opts.Lease.Duration {
		return ""
	}
	return "orphaned (" + why + ")"
}

// deleteGoneLocked deletes the free Leases of clusters no member found
// (found is this member's view, which every member shares), each on the
// condition that it is unchanged, one delete at a time per Lease: the
// looks until the cache shows it gone do not each send one. r.mu must be
// held.
func (r *Ring) deleteGoneLocked(ctx context.Context, byName map[string]*coordinationv1.Lease, found map[string]bool, now time.Time) {
	for _, l := range byName {
		x := l.Labels[ClusterLabel]
		if l.Labels[RoleLabel] != RoleCluster || x == "" || found[x] || r.held[clusterUnit(x)] != nil || r.claimable(l, now) == "" || l.DeletionTimestamp != nil || r.deleting[l.Name] {
			continue
		}
		r.deleting[l.Name] = true
		go func() {
			r.deleteLease(ctx, l.Name, l.ResourceVersion)
			r.mu.Lock()
			defer r.mu.Unlock()
			delete(r.deleting, l.Name)
		}()
	}
}

// clusterStatusLocked is Status.Clusters. r.mu must be held.
func (r *Ring) clusterStatusLocked(now time.Time) *sharding.ClusterStatus {
	if r.spread == nil {
		return nil
	}
	s := &sharding.ClusterStatus{Seen: r.seenCount, Disagree: slices.Clone(r.disagree)}
	for u, h := range r.held {
		if !u.isCluster() {
			continue
		}
		switch {
		case r.lapsed(r.renewedLocked(h), now):
			s.Fenced = append(s.Fenced, u.c)
		case h.state == bucketServing:
			s.Serving = append(s.Serving, u.c)
		case h.state == bucketSyncing:
			s.Syncing = append(s.Syncing, u.c)
		default:
			s.Draining = append(s.Draining, u.c)
		}
	}
	for _, l := range [][]string{s.Serving, s.Syncing, s.Draining, s.Fenced} {
		sort.Strings(l)
	}
	return s
}

// unitsOf is Layout.Units of a ring that spreads the clusters u finds,
// and whose own cluster the leader alone serves when elects.
func unitsOf(u ClusterUser, elects bool) string {
	if u == nil {
		return ""
	}
	own := "own cluster by every member"
	if elects {
		own = "own cluster by the leader"
	}
	return "clusters of " + strings.TrimSpace(u.Describe()) + "; " + own
}
