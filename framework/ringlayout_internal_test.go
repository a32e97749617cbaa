package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// quickRing are ring timings short enough for a fake server's tests.
func quickRing(o sharding.Options) sharding.Options {
	if o.Lease.Duration == 0 {
		o.Lease.Duration, o.Lease.RenewDeadline, o.Lease.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 100*time.Millisecond
	}
	if o.FormationDelay == 0 {
		o.FormationDelay = -1
	}
	return o
}

// layoutMember is a manager in ring "r" of namespace default, with one
// sharded controller that does nothing, running until stop is called.
type layoutMember struct {
	mgr  *Manager
	stop func()
}

// startLayoutMember starts member id on srv with opts (of which Ring,
// Namespace and Identity are set here), whose sharded controller is named
// ctl and reconciles kind example's objects.
func startLayoutMember[T object.Object](t *testing.T, srv *fake.Server, id string, opts sharding.Options, ctl string) *layoutMember {
	t.Helper()
	opts.Ring, opts.Lease.Namespace, opts.Lease.Identity = "r", "default", id
	mgr, err := NewManager(srv.Config(), Options{Sharding: opts})
	if err != nil {
		t.Fatal(err)
	}
	err = NewBuilder[T](mgr, ctl, ControllerOptions{Sharded: true}).
		Complete(reconcile.ObjectFunc[T](func(context.Context, T) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("member %s stopped with %v", id, err)
			}
		})
	}
	t.Cleanup(stop)
	return &layoutMember{mgr: mgr, stop: stop}
}

func (m *layoutMember) status() sharding.Status {
	st, _ := m.mgr.RingStatus()
	return st
}

// claimedIn counts the buckets m began to hold.
func (m *layoutMember) claimedIn() float64 {
	return testutil.ToFloat64(m.mgr.ringMetrics.Handovers.WithLabelValues("r", "in"))
}

// A member whose layout differs from the one holding the ring (another
// Buckets.Count) is refused, however long it runs: it holds no bucket, is
// not ready, says why naming both members and both layouts, and a metric
// counts it. Once the holding layout's members are gone (the last one
// left, releasing the ring) it joins by itself.
func TestRingRefusesAnotherLayoutUntilItsMembersAreGone(t *testing.T) {
	srv := fake.Start(t, fake.Options{})
	a := startLayoutMember[*corev1.ConfigMap](t, srv, "a", quickRing(sharding.Options{}), "cms")
	ringUntil(t, a.mgr, "a serves all 32 buckets", func(st sharding.Status) bool { return len(st.Serving) == 32 })

	b := startLayoutMember[*corev1.ConfigMap](t, srv, "b", quickRing(sharding.Options{Buckets: sharding.Buckets{Count: 8}}), "cms")
	ringUntil(t, b.mgr, "b refused", func(st sharding.Status) bool { return st.Refused != "" })
	st := b.status()
	for _, want := range []string{`member "b"`, `"a"`, "32 buckets", "8 buckets", "cms (ConfigMap)"} {
		if !strings.Contains(st.Refused, want) {
			t.Errorf("the refusal does not name %s: %s", want, st.Refused)
		}
	}
	if err := b.mgr.ring.Ready(); err == nil || err.Error() != st.Refused {
		t.Errorf("b's readiness = %v, want the refusal", err)
	}
	// Two LeaseDurations later (as a's renewals of the layout Lease tell)
	// b is still refused and holds nothing, and a's ring is untouched.
	refused := time.Now()
	ringUntil(t, b.mgr, "a renewed the ring's layout for two LeaseDurations", func(st sharding.Status) bool {
		if st.Refused == "" || len(st.Serving)+len(st.Syncing)+len(st.Draining) > 0 {
			t.Fatalf("b joined a ring held by another layout: %+v", st)
		}
		l := b.mgr.ring.CachedLease(ring.LayoutLeaseName("r"))
		return l != nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.Sub(refused) > 2*b.mgr.ring.Options().Lease.Duration
	})
	if n := b.claimedIn(); n != 0 {
		t.Errorf("b claimed %v buckets while refused", n)
	}
	if n := testutil.ToFloat64(b.mgr.ringMetrics.Refused.WithLabelValues("r")); n != 1 {
		t.Errorf("converge_shard_refusals_total = %v, want 1", n)
	}
	// a keeps the ring: never refused, and serving all 32 buckets (on a
	// loaded machine a renewal may miss its deadline, and a re-syncs a
	// bucket it fenced, so this waits for all 32 rather than asking once).
	ringUntil(t, a.mgr, "a serves its 32 buckets", func(st sharding.Status) bool {
		if st.Refused != "" {
			t.Fatalf("a, holding the ring, was refused: %+v", st)
		}
		return len(st.Serving) == 32 && a.mgr.ring.Ready() == nil
	})

	a.stop()
	ringUntil(t, b.mgr, "b serves all 8 buckets once a left", func(st sharding.Status) bool { return len(st.Serving) == 8 && st.Refused == "" })
	if err := b.mgr.ring.Ready(); err != nil {
		t.Errorf("b's readiness once it joined: %v", err)
	}
}

// Two programs on one ring name, sharding different kinds, are two
// layouts: the second is refused, and the first serves every bucket, so
// none of its objects is left unserved.
func TestRingRefusesAMemberRunningOtherShardedControllers(t *testing.T) {
	srv := fake.Start(t, fake.Options{})
	a := startLayoutMember[*corev1.ConfigMap](t, srv, "a", quickRing(sharding.Options{}), "cms")
	ringUntil(t, a.mgr, "a serves all 32 buckets", func(st sharding.Status) bool { return len(st.Serving) == 32 })
	b := startLayoutMember[*corev1.Secret](t, srv, "b", quickRing(sharding.Options{}), "secrets")
	ringUntil(t, b.mgr, "b refused", func(st sharding.Status) bool { return st.Refused != "" })
	for _, want := range []string{"cms (ConfigMap)", "secrets (Secret)", `"a"`, `"b"`} {
		if !strings.Contains(b.status().Refused, want) {
			t.Errorf("the refusal does not name %s: %s", want, b.status().Refused)
		}
	}
	if st := a.status(); len(st.Serving) != 32 || !slices.Equal(st.Members, []string{"a"}) {
		t.Errorf("a: %+v, want it serving every bucket alone", st)
	}
}

// Members of two layouts started together: exactly one layout takes the
// ring, every time, and the other never claims a bucket.
func TestRingLayoutsStartedTogetherNeverBothHoldBuckets(t *testing.T) {
	for i := range 5 {
		t.Run(fmt.Sprint("run ", i), func(t *testing.T) {
			srv := fake.Start(t, fake.Options{})
			var a, b *layoutMember
			var wg sync.WaitGroup
			wg.Go(func() { a = startLayoutMember[*corev1.ConfigMap](t, srv, "a", quickRing(sharding.Options{}), "cms") })
			wg.Go(func() {
				b = startLayoutMember[*corev1.ConfigMap](t, srv, "b", quickRing(sharding.Options{Buckets: sharding.Buckets{Count: 8}}), "cms")
			})
			wg.Wait()
			ringUntil(t, a.mgr, "one of a and b refused", func(sharding.Status) bool { return (a.status().Refused == "") != (b.status().Refused == "") })
			winner, loser, n := a, b, 32
			if a.status().Refused != "" {
				winner, loser, n = b, a, 8
			}
			ringUntil(t, winner.mgr, "the winner serves every bucket", func(st sharding.Status) bool { return len(st.Serving) == n })
			if got := loser.claimedIn(); got != 0 {
				t.Errorf("the refused member claimed %v buckets", got)
			}
			var leases coordinationv1.LeaseList
			if err := winner.mgr.APIReader().List(t.Context(), &leases, informers.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			for _, l := range leases.Items {
				if l.Labels[ring.RoleLabel] == ring.RoleBucket && ring.LayoutOf(&l) != winner.mgr.ring.Layout() {
					t.Errorf("bucket Lease %s records layout %s, held by %q, not the winner's", l.Name, ring.LayoutOf(&l), ring.Holder(&l))
				}
			}
		})
	}
}

// staleLease is a Lease of ring "r" of role, held by id, renewed at
// renewed, recording layout.
func staleLease(name, role, id string, renewed time.Time, layout ring.Layout) *coordinationv1.Lease {
	stamp := metav1.NewMicroTime(renewed)
	secs := int32(3600)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{ring.RingLabel: "r", ring.RoleLabel: role}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &stamp, RenewTime: &stamp},
	}
	layout.Annotate(l)
	return l
}

// A member started long after another crashed sees the crashed member's
// Leases expired at once, by the renewal time they carry: it neither
// counts the crashed member as live nor waits Lease.Duration for its
// buckets. The crashed member "ghost" last renewed two hours ago, with a
// Lease.Duration of one hour; member "other" is live. With MaxClockSkew
// negative (Leases judged only by what a member saw change), the ghost
// counts as live for the first Lease.Duration: the negative control.
func TestRingStartedAfterACrashServesTheCrashedMembersBuckets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		skew      time.Duration
		wantGhost bool
	}{
		{"judged by the renewal time carried", 0, false},
		{"judged by changes seen only (negative control)", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			layout := ring.Layout{Cut: "32/" + string(sharding.ByUID), Controllers: "cms (ConfigMap)"}
			// other holds its share of a ring of other and me; the ghost
			// holds me's.
			crash, now := time.Now().Add(-2*time.Hour), time.Now()
			owners := ring.Assign(32, []string{"me", "other"})
			objs := []object.Object{
				staleLease(ring.MemberLeaseName("r", "ghost"), ring.RoleMember, "ghost", crash, layout),
				staleLease(ring.MemberLeaseName("r", "other"), ring.RoleMember, "other", now, layout),
				staleLease(ring.LayoutLeaseName("r"), ring.RoleLayout, "other", now, layout),
			}
			for b, o := range owners {
				switch o {
				case "me":
					objs = append(objs, staleLease(ring.BucketLeaseName("r", b), ring.RoleBucket, "ghost", crash, layout))
				case "other":
					objs = append(objs, staleLease(ring.BucketLeaseName("r", b), ring.RoleBucket, "other", now, layout))
				}
			}
			srv := fake.Start(t, fake.Options{Objects: objs})
			opts := quickRing(sharding.Options{MaxClockSkew: tc.skew, Lease: lease.Options{Duration: time.Hour, RenewDeadline: 50 * time.Minute, RetryPeriod: 100 * time.Millisecond}})
			me := startLayoutMember[*corev1.ConfigMap](t, srv, "me", opts, "cms")
			ringUntil(t, me.mgr, "me assessed the ring", func(st sharding.Status) bool { return slices.Contains(st.Members, "me") })
			if got := slices.Contains(me.status().Members, "ghost"); got != tc.wantGhost {
				t.Fatalf("members %v: ghost counted live = %v, want %v", me.status().Members, got, tc.wantGhost)
			}
			if tc.wantGhost {
				return
			}
			mine := 0
			for _, o := range owners {
				if o == "me" {
					mine++
				}
			}
			ringUntil(t, me.mgr, "me serves its share, the ghost's buckets included", func(st sharding.Status) bool { return len(st.Serving) == mine })
		})
	}
}
