package ring

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations and role of the ring's layout. Member Leases and bucket
// Leases record their member's layout; the layout Lease records the layout
// that may hold buckets.
const (
	// LayoutAnno holds the cut of the hash space: "32/uid"
	// (Buckets.Count/Key).
	LayoutAnno = "converge.dev/layout"
	// ControllersAnno holds the sharded controllers, by name and kind:
	// "cms (ConfigMap), web (Deployment.apps)".
	ControllersAnno = "converge.dev/controllers"
	RoleLayout      = "layout"
	// NoBuckets is the Cut of a ring without sharded controllers, which
	// claims no bucket: its Buckets are not part of its layout.
	NoBuckets = "none"
)

// Layout is what members of one ring must agree on to share its
// buckets: how the hash space is cut (Buckets.Count and By: a bucket Lease
// of another cut stands for another range of objects), and which sharded
// controllers serve each bucket (names and kinds: a member without one of
// them would leave that controller's objects of its buckets unserved).
type Layout struct {
	// Cut is "32/uid", as handoverMarks records it; NoBuckets for a
	// ring without sharded controllers.
	Cut string
	// Controllers are the sharded controllers, sorted by name:
	// "cms (ConfigMap), web (Deployment.apps)".
	Controllers string
	// Units says how the ring's whole-cluster units are made: "clusters
	// of namespaces(labels: spread=a)", the providers of the members that
	// spread clusters (see SpreadClusters); "" when the ring has buckets
	// only. It is folded into ControllersAnno after " | ", so a ring
	// without clusters records what it always did, and members that make
	// their clusters differently refuse each other as members of other
	// bucket layouts do.
	Units string
}

// unitsSep separates Controllers from Units in ControllersAnno.
const unitsSep = " | "

// controllersAnno is the value of ControllersAnno that records l.
func (l Layout) controllersAnno() string {
	if l.Units == "" {
		return l.Controllers
	}
	return l.Controllers + unitsSep + l.Units
}

// String describes the layout for errors and logs.
func (l Layout) String() string {
	if l.Cut == NoBuckets && l.Controllers == "" {
		if l.Units == "" {
			return "no buckets (no sharded controllers)"
		}
		return "no buckets (no sharded controllers), " + l.Units
	}
	count, key, _ := strings.Cut(l.Cut, "/")
	if l.Cut == "" {
		count, key = "?", "?"
	}
	ctls := l.Controllers
	if ctls == "" {
		ctls = "none"
	}
	if l.Units != "" {
		ctls += ", " + l.Units
	}
	return fmt.Sprintf("%s buckets by %s, sharded controllers: %s", count, key, ctls)
}

// LayoutOf returns the layout Lease l records.
func LayoutOf(l *coordinationv1.Lease) Layout {
	ctls, units, _ := strings.Cut(l.Annotations[ControllersAnno], unitsSep)
	return Layout{Cut: l.Annotations[LayoutAnno], Controllers: ctls, Units: units}
}

// Annotate records layout on Lease l.
func (l Layout) Annotate(lease *coordinationv1.Lease) {
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, LayoutAnno, l.Cut)
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, ControllersAnno, l.controllersAnno())
}

// LayoutLeaseName is the name of the ring's layout Lease.
func LayoutLeaseName(ring string) string { return ring + "-layout" }

// newLayout returns the layout of a ring cut by buckets, whose sharded
// controllers are users.
func newLayout(cut string, users []User, units string) Layout {
	names := make([]string, 0, len(users))
	for _, u := range users {
		names = append(names, u.Describe())
	}
	slices.Sort(names)
	return Layout{Cut: cut, Controllers: strings.Join(names, ", "), Units: units}
}

// writeLayout renews this member's hold of the ring's layout Lease, which
// every member of the layout that holds the ring renews every round (a
// member writes for its buckets only while its last renewal is within
// RenewDeadline, see check), or takes the Lease over when no member of the
// layout it records renewed it for Lease.Duration (or RenewDeadline, after
// the last of them released it); otherwise this member is refused. A
// renewal is a JSON patch that tests the layout first, so members of one
// layout renew at once without conflicts and none renews a layout taken
// over meanwhile.
func (r *Ring) writeLayout(ctx context.Context) {
	start := time.Now()
	name := LayoutLeaseName(r.opts.Ring)
	cached := r.CachedLease(name)
	var err error
	if cached == nil {
		_, err = r.leases.Create(ctx, r.newLease(name, RoleLayout, start), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return // the cache lags: look again next round
		}
	} else {
		_, err = r.leases.Patch(ctx, name, types.JSONPatchType, r.layoutPatch(start), metav1.PatchOptions{})
	}
	switch {
	case err == nil:
		r.heldLayout(start, "")
		return
	case !apierrors.IsInvalid(err) || cached == nil || LayoutOf(cached) == r.layout:
		// Failed, or the cache lags: look again next round.
		r.log.V(1).Info("renewing the ring's layout Lease failed", "error", err.Error())
		return
	}
	// The Lease records another layout (its test failed).
	r.mu.RLock()
	why := r.layoutClaimableLocked(cached, time.Now())
	r.mu.RUnlock()
	if why == "" {
		r.refuse(cached)
		return
	}
	c := cached.DeepCopy()
	now := metav1.NewMicroTime(start)
	r.layout.Annotate(c)
	c.Spec.HolderIdentity, c.Spec.RenewTime, c.Spec.AcquireTime = &r.opts.Lease.Identity, &now, &now
	if _, err = r.leases.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		r.log.V(1).Info("taking the ring's layout Lease over failed", "error", err.Error())
		return
	}
	r.heldLayout(start, fmt.Sprintf("took the ring over from layout %s (%s)", LayoutOf(cached), why))
}

// layoutPatch is the JSON patch of a renewal of the layout Lease sent at
// now: test that it records this member's layout, then name this member
// as the last to renew it.
func (r *Ring) layoutPatch(now time.Time) []byte {
	esc := func(k string) string { return "/metadata/annotations/" + strings.ReplaceAll(k, "/", "~1") }
	ops := []map[string]any{
		{"op": "test", "path": esc(LayoutAnno), "value": r.layout.Cut},
		{"op": "test", "path": esc(ControllersAnno), "value": r.layout.controllersAnno()},
		{"op": "add", "path": "/spec/holderIdentity", "value": r.opts.Lease.Identity},
		{"op": "add", "path": "/spec/renewTime", "value": metav1.NewMicroTime(now)},
	}
	b, err := json.Marshal(ops)
	if err != nil {
		panic("framework: the layout Lease's patch does not encode: " + err.Error())
	}
	return b
}

// heldLayout records a successful write of the layout Lease, sent at
// start; took says how it was taken over, "" for a renewal.
func (r *Ring) heldLayout(start time.Time, took string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.layoutRenewed.IsZero() && r.refused == nil {
		r.changedLocked() // held for the first time
	}
	if start.After(r.layoutRenewed) {
		r.layoutRenewed = start
	}
	if took != "" {
		r.log.Info("layout of the ring", "layout", r.layout.String(), "how", took)
	}
	if r.refused != nil {
		r.log.Info("joined the ring: the members of the layout that held it are gone", "layout", r.layout.String())
		r.refused, r.refusedBy = nil, Layout{}
		r.changedLocked()
		r.poke()
	}
}

// layoutClaimableLocked says why layout Lease l may be taken over: its
// Holder released it and it was not renewed for RenewDeadline since
// ("released"), or it was not renewed for Lease.Duration ("expired"); ""
// while a member of its layout may still write for buckets. The times are
// measured as claimable measures them. r.mu must be held.
func (r *Ring) layoutClaimableLocked(l *coordinationv1.Lease, now time.Time) string {
	o, ok := r.seen[l.Name]
	if !ok || o.rv != l.ResourceVersion {
		return "" // not assessed in this version yet
	}
	switch unchanged := now.Sub(o.since); {
	case Holder(l) == "" && unchanged >= r.opts.Lease.RenewDeadline:
		return "released"
	case unchanged >= r.opts.Lease.Duration:
		return "expired"
	}
	return ""
}

// refuse makes this member refused: the ring's layout Lease, last seen as
// l, records another layout, which live members hold. It gives up every
// bucket it holds (none, unless the Lease was taken over while it was cut
// off) and claims none until it can renew the Lease.
func (r *Ring) refuse(l *coordinationv1.Lease) {
	theirs := LayoutOf(l)
	r.mu.Lock()
	defer r.mu.Unlock()
	holders := []string{}
	if h := Holder(l); h != "" {
		holders = append(holders, h)
	}
	now := time.Now()
	for _, m := range r.ringLeases() {
		id := Holder(m)
		// A Lease not looked at yet (the first rounds) is judged by the
		// time it carries, as the next look will judge it.
		o, ok := r.seen[m.Name]
		if !ok {
			o.since = r.backdateLocked(m, now)
		}
		if m.Labels[RoleLabel] != RoleMember || id == "" || id == r.opts.Lease.Identity || LayoutOf(m) != theirs ||
			now.Sub(o.since) >= r.opts.Lease.Duration || slices.Contains(holders, id) {
			continue
		}
		holders = append(holders, id)
	}
	slices.Sort(holders)
	elect := ""
	if r.Elects {
		elect = "; while refused, this member does not campaign for leadership (Options.LeaderElection), and steps down if it leads"
	}
	err := fmt.Errorf("framework: sharding ring %q in namespace %s: member %q (%s) is refused: the ring is held by layout %s, of the live member(s) %q this member sees; every member of a ring needs the same Options.Sharding.Buckets (Count and By), the same sharded controllers, and the same Options.Sharding.Clusters, providers and Options.LeaderElection.Enabled; this member joins once no member of that layout is left (sharding.Options says how to change a ring's layout)%s",
		r.opts.Ring, r.opts.Lease.Namespace, r.opts.Lease.Identity, r.layout, theirs, holders, elect)
	if r.refused == nil {
		r.changedLocked()
	}
	if r.refused == nil || r.refusedBy != theirs {
		r.log.Error(err, "refused by the sharding ring")
		r.metrics.Refused.WithLabelValues(r.opts.Ring).Inc()
	}
	r.refused, r.refusedBy = err, theirs
	for b := range r.held {
		r.loseLocked(b, "the ring's layout Lease records another layout")
	}
}

// releaseLayout releases the layout Lease when this member, leaving, is
// the last live member of its layout as far as it can tell: a member of
// another layout may then take the ring over after RenewDeadline instead
// of Lease.Duration. The patch tests that the Lease still records this
// layout and names this member as its last renewer, so a member of the
// layout that renewed it since keeps it.
func (r *Ring) releaseLayout(ctx context.Context) {
	r.mu.RLock()
	others := slices.ContainsFunc(r.members, func(m string) bool { return m != r.opts.Lease.Identity })
	held := r.refused == nil && !r.layoutRenewed.IsZero()
	r.mu.RUnlock()
	if others || !held {
		return
	}
	esc := func(k string) string { return "/metadata/annotations/" + strings.ReplaceAll(k, "/", "~1") }
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": esc(LayoutAnno), "value": r.layout.Cut},
		{"op": "test", "path": esc(ControllersAnno), "value": r.layout.controllersAnno()},
		{"op": "test", "path": "/spec/holderIdentity", "value": r.opts.Lease.Identity},
		{"op": "add", "path": "/spec/holderIdentity", "value": ""},
		{"op": "add", "path": "/spec/renewTime", "value": metav1.NewMicroTime(time.Now())},
	})
	if err != nil {
		return
	}
	if _, err := r.leases.Patch(ctx, LayoutLeaseName(r.opts.Ring), types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsInvalid(err) && !apierrors.IsNotFound(err) {
		r.log.Info("releasing the ring's layout Lease failed; another layout may take the ring over after LeaseDuration", "error", err.Error())
	}
}
