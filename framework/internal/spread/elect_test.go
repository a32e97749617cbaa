package spread_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/internal/testenv"
	"github.com/converge-dev/converge/sharding"
)

// elect is the options of a member of ring "el" that spreads clusters,
// with leader election id when id is not "".
func elect(id string) framework.Options {
	o := framework.Options{Sharding: sharding.Options{Ring: "el", Clusters: true}}
	if id != "" {
		o.LeaderElection = framework.LeaderElectionOptions{Enabled: true, ID: id}
	}
	return o
}

// refusal waits until mgr is refused by its ring and returns the refusal.
func refusal(t *testing.T, mgr *framework.Manager) string {
	t.Helper()
	testenv.Eventually(t, "the member is refused", func() bool {
		s, _ := mgr.RingStatus()
		return s.Refused != ""
	})
	s, _ := mgr.RingStatus()
	return s.Refused
}

func led(mgr *framework.Manager) bool {
	select {
	case <-mgr.Elected():
		return true
	default:
		return false
	}
}

// A member the ring refuses does not campaign for leadership, and says so:
// it is alone in its election (another ID than the ring's leader), so it
// would lead at once if it campaigned. It never reconciles the manager's
// own cluster, which the ring's leader does.
func TestRefusedMemberDoesNotCampaign(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	a, b := unique("ea"), unique("eb")
	names := spreadNamespaces(t, cs, a, 2)
	r := newReferee()
	r.ownNS = testenv.Namespace(t, cs, "own")
	testenv.CreateConfigMap(t, cs, r.ownNS, "cm", nil)
	first, _ := memberWith(t, "m0", leaseNS, a, elect("lead-a"), r, nil)
	testenv.Eventually(t, "the first member leads and engages its namespaces", func() bool {
		return led(first) && balanced(r, names, []string{"m0"}, 2)
	})
	second, _ := memberWith(t, "m1", leaseNS, b, elect("lead-b"), r, nil)
	msg := refusal(t, second)
	if !strings.Contains(msg, "does not campaign for leadership") {
		t.Errorf("the refusal does not say the member does not campaign: %s", msg)
	}
	want := touchAll(t, cs, r, names, "1")
	testenv.Eventually(t, "every change is reconciled", func() bool { return allReconciled(r, want) })
	if led(second) {
		t.Fatal("the refused member leads")
	}
	if _, err := cs.CoordinationV1().Leases(leaseNS).Get(t.Context(), "lead-b", metav1.GetOptions{}); err == nil {
		t.Error("the refused member campaigned: its election Lease exists")
	}
	if got, _ := r.ownReconcilers(); slices.Contains(got, "m1") {
		t.Errorf("the refused member reconciled the own cluster: %v", got)
	}
}

// A leader the ring comes to refuse (the layout Lease taken over by
// another layout) steps down at once: Start returns
// ErrLeaderElectionLost, while the other layout's holder is still live.
func TestLeaderRefusedLaterStepsDown(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	label := unique("down")
	names := spreadNamespaces(t, cs, label, 1)
	r := newReferee()
	mgr, run := memberWith(t, "m0", leaseNS, label, elect("lead"), r, nil)
	testenv.Eventually(t, "the member leads and engages its namespace", func() bool {
		return led(mgr) && balanced(r, names, []string{"m0"}, 1)
	})
	leases := cs.CoordinationV1().Leases(leaseNS)
	err := retryConflict(func() error {
		l, err := leases.Get(t.Context(), ring.LayoutLeaseName("el"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		ring.Layout{Cut: ring.NoBuckets, Units: "clusters of elsewhere"}.Annotate(l)
		id, now := "intruder", metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.RenewTime = &id, &now
		_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the refused leader steps down", func() bool {
		select {
		case <-run.Done:
			return true
		default:
			return false
		}
	})
	if !errors.Is(run.Err, framework.ErrLeaderElectionLost) {
		t.Errorf("Start returned %v, want ErrLeaderElectionLost", run.Err)
	}
}

// retryConflict runs fn until it does not fail with a conflict.
func retryConflict(fn func() error) error {
	for {
		err := fn()
		if err == nil || !strings.Contains(err.Error(), "the object has been modified") {
			return err
		}
	}
}

// Whether the manager's own cluster goes to the leader alone or to every
// member is part of the ring's layout: a member with leader election and
// one without refuse each other, whichever starts first, naming both
// members and both settings.
func TestLeaderElectionIsPartOfTheLayout(t *testing.T) {
	for _, firstID := range []string{"lead", ""} {
		name := "election first"
		if firstID == "" {
			name = "no election first"
		}
		t.Run(name, func(t *testing.T) {
			cs := kubernetes.NewForConfigOrDie(plane.Config(t))
			leaseNS := testenv.Namespace(t, cs)
			label := unique("le")
			names := spreadNamespaces(t, cs, label, 2)
			r := newReferee()
			first, _ := memberWith(t, "m0", leaseNS, label, elect(firstID), r, nil)
			testenv.Eventually(t, "the first member engages both namespaces", func() bool { return balanced(r, names, []string{"m0"}, 2) })
			secondID := "lead"
			if firstID != "" {
				secondID = ""
			}
			second, _ := memberWith(t, "m1", leaseNS, label, elect(secondID), r, nil)
			msg := refusal(t, second)
			for _, want := range []string{`"m0"`, `"m1"`, "own cluster by the leader", "own cluster by every member"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not name %s: %s", want, msg)
				}
			}
			if s, _ := second.RingStatus(); s.Clusters != nil && len(s.Clusters.Serving)+len(s.Clusters.Syncing) > 0 {
				t.Errorf("the refused member holds clusters: %+v", s.Clusters)
			}
			if fs, _ := first.RingStatus(); fs.Refused != "" || slices.Contains(fs.Members, "m1") {
				t.Errorf("the first member is refused too, or lists the refused one as a member: %+v", fs)
			}
		})
	}
}

// The refusal names every live member of the ring's layout, from the
// first: the newcomer has not watched their Leases change yet.
func TestRefusalNamesEveryLiveMember(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(plane.Config(t))
	leaseNS := testenv.Namespace(t, cs)
	a, b := unique("na"), unique("nb")
	names := spreadNamespaces(t, cs, a, 3)
	r := newReferee()
	ids := []string{"m0", "m1", "m2"}
	for _, id := range ids {
		memberWith(t, id, leaseNS, a, elect(""), r, nil)
	}
	testenv.Eventually(t, "each namespace is engaged by one member", func() bool { return balanced(r, names, ids, 1) })
	late, _ := memberWith(t, "m3", leaseNS, b, elect(""), r, nil)
	msg := refusal(t, late)
	if !strings.Contains(msg, `["m0" "m1" "m2"]`) {
		t.Errorf("the first refusal does not name every live member: %s", msg)
	}
}
