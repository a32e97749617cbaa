package declarative_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/internal/testenv"
)

// A Job with a ttlSecondsAfterFinished and without RunOnce is created
// again each time the TTL deletes it: the parent gets one Warning Event
// saying so, whatever the reruns, and its Ready condition says it; with
// RunOnce neither.
func TestJobWithATTLWithoutRunOnceIsReported(t *testing.T) {
	testenv.InBothForms(t, testJobWithATTLWithoutRunOnceIsReported)
}

func testJobWithATTLWithoutRunOnceIsReported(t *testing.T) {
	children := func(runOnce bool) func() []any {
		return func() []any {
			migrate := job("migrate")
			migrate.Spec.TTLSecondsAfterFinished = new(int32(60))
			c := declarative.NewChild(migrate)
			if runOnce {
				c = c.RunOnce()
			}
			return []any{c, declarative.NewChild(deployment("web")).After(migrate)}
		}
	}
	r := startGraph(t, children(false))
	const note = "it runs again each time its ttlSecondsAfterFinished deletes it: declare it RunOnce to run it once"
	r.waitReady(declarative.WaitingReason, "Deployment web waits for Job migrate (Complete; "+note+") since ")
	testenv.Eventually(t, "a Warning Event "+declarative.RerunAfterTTLReason, func() bool { return hasEvent(t, r, declarative.RerunAfterTTLReason) })

	setStatus(r, "migrate", &batchv1.Job{}, completeJob)
	testenv.Eventually(t, "the Deployment applied", func() bool { return r.get("web", &appsv1.Deployment{}) })
	setStatus(r, "web", &appsv1.Deployment{}, availableDeployment)
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready (Job migrate runs again each time its ttlSecondsAfterFinished deletes it: declare it RunOnce to run it once)")

	// What the TTL-after-finished controller does: converge creates it again.
	old := &batchv1.Job{}
	r.get("migrate", old)
	if err := r.mgr.Client().Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Job created again", func() bool {
		j := &batchv1.Job{}
		return r.get("migrate", j) && j.UID != old.UID
	})
	r.settle()
	if n := countEvents(t, r, declarative.RerunAfterTTLReason); n != 1 {
		t.Errorf("%d Warning Events %s, want 1 (one per change)", n, declarative.RerunAfterTTLReason)
	}

	r.declare(children(true))
	setStatus(r, "migrate", &batchv1.Job{}, completeJob)
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
	r.settle()
	if c := r.ready(); c.Message != "all 2 children are ready" {
		t.Errorf("Ready of a run-once Job: %q", c.Message)
	}
	if n := countEvents(t, r, declarative.RerunAfterTTLReason); n != 1 {
		t.Errorf("%d Warning Events %s after RunOnce, want still 1", n, declarative.RerunAfterTTLReason)
	}
}
