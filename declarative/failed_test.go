package declarative_test

import (
	"github.com/converge-dev/converge/internal/testenv"

	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/declarative"
)

// A child its FailedWhen calls failed reads as failed, not as a wait, in
// the words given; what is After it is not applied; once FailedWhen no
// longer holds, it is a wait again, and ready in the end.
func TestFailedWhenSaysAChildFailed(t *testing.T) {
	testenv.InBothForms(t, testFailedWhenSaysAChildFailed)
}

func testFailedWhenSaysAChildFailed(t *testing.T) {
	state := func(s string) func() []any {
		return func() []any {
			cm := configMap("config")
			cm.Data = map[string]string{"state": s}
			return []any{
				declarative.NewChild(cm).
					ReadyWhen("fixed", func(c *corev1.ConfigMap) bool { return c.Data["state"] == "fixed" }).
					FailedWhen("says broken", func(c *corev1.ConfigMap) bool { return c.Data["state"] == "broken" }),
				declarative.NewChild(configMap("after")).After(cm),
			}
		}
	}
	r := startGraph(t, state("broken"))
	r.waitReady(declarative.ChildFailedReason, "ConfigMap config failed (says broken)")
	if r.get("after", &corev1.ConfigMap{}) {
		t.Error("a child After a failed one was applied")
	}
	r.declare(state("starting"))
	r.waitReady(declarative.WaitingReason, "ConfigMap after waits for ConfigMap config (fixed)")
	r.declare(state("fixed"))
	r.waitReady(declarative.ChildrenReadyReason, "all 2 children are ready")
}

// A Deployment whose rollout passed its progress deadline failed, with or
// without a ReadyWhen; once its spec changes (a newer generation than the
// status observed), it is a wait again.
func TestDeploymentPastItsProgressDeadlineFailed(t *testing.T) {
	testenv.InBothForms(t, testDeploymentPastItsProgressDeadlineFailed)
}

func testDeploymentPastItsProgressDeadlineFailed(t *testing.T) {
	image := "nginx:bad"
	children := func() []any {
		d := deployment("web")
		d.Spec.Template.Spec.Containers[0].Image = image
		return []any{
			declarative.NewChild(d).ReadyWhen("serving", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas > 0 }),
			declarative.NewChild(deployment("plain")),
		}
	}
	r := startGraph(t, children)
	r.waitReady(declarative.NotReadyReason, "Deployment web is not ready yet (serving)")
	stuck := func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UnavailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5d4f" has timed out progressing.`},
		}}
	}
	setStatus(r, "web", &appsv1.Deployment{}, stuck)
	r.waitReady(declarative.ChildFailedReason, `Deployment web failed (ProgressDeadlineExceeded: ReplicaSet "web-5d4f" has timed out progressing.)`)

	r.change(func() { image = "nginx:good" }) // a new rollout: the deadline counts again
	r.waitReady(declarative.NotReadyReason, "Deployment web is not ready yet (serving)")

	setStatus(r, "web", &appsv1.Deployment{}, availableDeployment)
	setStatus(r, "plain", &appsv1.Deployment{}, stuck)
	r.waitReady(declarative.ChildFailedReason, `Deployment plain failed (ProgressDeadlineExceeded: `)
}
