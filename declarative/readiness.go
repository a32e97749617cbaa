package declarative

import (
	"fmt"
	"reflect"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/object"
)

// readiness is what one reconcile found of a child's readiness.
type readiness struct {
	ready bool
	// failure says whether and how the child failed: it will not become
	// ready without a change.
	failure failure
	// what names what readiness means for the child ("Complete" for a
	// Job, "Available" for a Deployment), for messages.
	what string
	// why is the cause of a failure, or empty.
	why string
}

// failed reports whether the child will not become ready without a change.
func (r readiness) failed() bool { return r.failure != notFailed }

// failure is how a child failed, which its message says.
type failure uint8

const (
	notFailed failure = iota
	// failedItself: the child says it failed (a Job's Failed condition, a
	// Deployment past its progress deadline, a FailedWhen): "Job migrate
	// failed (BackoffLimitExceeded: ...)".
	failedItself
	// failedApply: its apply failed, its readiness was not read:
	// "ConfigMap config could not be applied: ...".
	failedApply
	// failedCheck: its readiness could not be read (a ReadyWhen or
	// FailedWhen that panicked, a status that does not decode): "Deployment
	// web is not ready (serving): its ReadyWhen panicked: ...".
	failedCheck
)

// Names of what readiness means, per kind (see readinessOf).
const (
	waitCreated      = "created"
	waitAvailable    = "Available"
	waitReady        = "Ready"
	waitComplete     = "Complete"
	waitBound        = "Bound"
	waitLoadBalancer = "load balancer ingress"
)

// expectedReadiness names what readiness will mean for a child of kind gk
// that the cache does not show yet: custom, what its ReadyWhen says, when
// it has one.
func expectedReadiness(gk schema.GroupKind, custom string) string {
	switch {
	case custom != "":
		return custom
	case gk == (schema.GroupKind{Group: "apps", Kind: "Deployment"}), gk == (schema.GroupKind{Group: "apps", Kind: "DaemonSet"}):
		return waitAvailable
	case gk == (schema.GroupKind{Group: "apps", Kind: "StatefulSet"}), gk == (schema.GroupKind{Kind: "Pod"}):
		return waitReady
	case gk == (schema.GroupKind{Group: "batch", Kind: "Job"}):
		return waitComplete
	case gk == (schema.GroupKind{Kind: "PersistentVolumeClaim"}):
		return waitBound
	}
	return waitCreated
}

// readinessOf is the built-in readiness of live, a child the cache holds
// (typed or unstructured):
//
//   - Deployment: status.observedGeneration current, the Available condition
//     True, and spec.replicas updated and available with no old replicas
//     left; the Progressing condition False with reason
//     ProgressDeadlineExceeded (for the current generation) is a failure;
//   - StatefulSet: observedGeneration current, spec.replicas ready and
//     available and, for a RollingUpdate without partition, updated;
//   - DaemonSet: observedGeneration current, every scheduled pod updated and
//     available;
//   - Job: the Complete condition True; the Failed condition True is a
//     failure;
//   - PersistentVolumeClaim: phase Bound; phase Lost is a failure;
//   - Service: of type LoadBalancer, an ingress assigned; others at once;
//   - Pod: the Ready condition True, or phase Succeeded; phase Failed is a
//     failure;
//   - any other kind with a Ready condition in status.conditions (else an
//     Available one): that condition True, its observedGeneration (and
//     status.observedGeneration, when set) current;
//   - any other kind: once it exists.
func readinessOf(gk schema.GroupKind, live object.Object) readiness {
	if u, ok := live.(*unstructured.Unstructured); ok {
		if typed := builtinType(gk); typed != nil {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
				return readiness{failure: failedCheck, what: expectedReadiness(gk, ""), why: fmt.Sprintf("decode: %v", err)}
			}
			live = typed
		}
	}
	switch o := live.(type) {
	case *appsv1.Deployment:
		return deploymentReady(o)
	case *appsv1.StatefulSet:
		return statefulSetReady(o)
	case *appsv1.DaemonSet:
		s := o.Status
		return readiness{what: waitAvailable, ready: s.ObservedGeneration >= o.Generation &&
			s.UpdatedNumberScheduled >= s.DesiredNumberScheduled && s.NumberAvailable >= s.DesiredNumberScheduled}
	case *batchv1.Job:
		return jobReady(o)
	case *corev1.PersistentVolumeClaim:
		r := readiness{what: waitBound, ready: o.Status.Phase == corev1.ClaimBound}
		if o.Status.Phase == corev1.ClaimLost {
			r.failure, r.why = failedItself, "its volume is lost"
		}
		return r
	case *corev1.Service:
		if o.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return readiness{what: waitCreated, ready: true}
		}
		return readiness{what: waitLoadBalancer, ready: len(o.Status.LoadBalancer.Ingress) > 0}
	case *corev1.Pod:
		return podReady(o)
	}
	if !hasStatus(live) {
		return readiness{what: waitCreated, ready: true}
	}
	return conditionReady(live)
}

// statusFields caches, per Go type, whether it has a Status field.
var statusFields sync.Map // reflect.Type -> bool

// hasStatus reports whether live may carry status conditions: it is
// unstructured, or its Go type has a Status field (a ConfigMap or a Secret
// has none, and is ready once it exists).
func hasStatus(live object.Object) bool {
	if _, ok := live.(*unstructured.Unstructured); ok {
		return true
	}
	t := reflect.TypeOf(live)
	if has, ok := statusFields.Load(t); ok {
		return has.(bool)
	}
	e := t
	for e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	has := false
	if e.Kind() == reflect.Struct {
		_, has = e.FieldByName("Status")
	}
	statusFields.Store(t, has)
	return has
}

// builtinType returns a new typed object for the kinds readinessOf knows,
// or nil.
func builtinType(gk schema.GroupKind) object.Object {
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return &appsv1.Deployment{}
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return &appsv1.StatefulSet{}
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		return &appsv1.DaemonSet{}
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		return &batchv1.Job{}
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		return &corev1.PersistentVolumeClaim{}
	case schema.GroupKind{Kind: "Service"}:
		return &corev1.Service{}
	case schema.GroupKind{Kind: "Pod"}:
		return &corev1.Pod{}
	}
	return nil
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1 // the API server's default
	}
	return *p
}

func deploymentReady(d *appsv1.Deployment) readiness {
	s, want := d.Status, replicas(d.Spec.Replicas)
	available := false
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available = c.Status == corev1.ConditionTrue
		}
	}
	r := readiness{what: waitAvailable, ready: s.ObservedGeneration >= d.Generation && available &&
		s.UpdatedReplicas >= want && s.Replicas == s.UpdatedReplicas && s.AvailableReplicas >= want}
	for _, c := range s.Conditions {
		// The Deployment controller gives up on a rollout past
		// spec.progressDeadlineSeconds; a change of the spec (a newer
		// generation) starts another.
		if !r.ready && c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse &&
			c.Reason == "ProgressDeadlineExceeded" && s.ObservedGeneration >= d.Generation {
			r.failure, r.why = failedItself, cause(c.Reason, c.Message)
		}
	}
	return r
}

// cause joins a condition's reason and message, either maybe empty.
func cause(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

func statefulSetReady(ss *appsv1.StatefulSet) readiness {
	s, want := ss.Status, replicas(ss.Spec.Replicas)
	ready := s.ObservedGeneration >= ss.Generation && s.ReadyReplicas >= want && s.AvailableReplicas >= want
	if u := ss.Spec.UpdateStrategy; u.Type != appsv1.OnDeleteStatefulSetStrategyType &&
		(u.RollingUpdate == nil || u.RollingUpdate.Partition == nil || *u.RollingUpdate.Partition == 0) {
		ready = ready && s.UpdatedReplicas >= want
	}
	return readiness{what: waitReady, ready: ready}
}

func jobReady(j *batchv1.Job) readiness {
	r := readiness{what: waitComplete}
	for _, c := range j.Status.Conditions {
		switch {
		case c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue:
			r.ready = true
		case c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue:
			r.failure, r.why = failedItself, cause(c.Reason, c.Message)
		}
	}
	return r
}

func podReady(p *corev1.Pod) readiness {
	r := readiness{what: waitReady}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		r.ready = true
		return r
	case corev1.PodFailed:
		r.failure, r.why = failedItself, cause(p.Status.Reason, p.Status.Message)
		return r
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.ready = c.Status == corev1.ConditionTrue
		}
	}
	return r
}

// conditionReady reads a Ready (else Available) condition from live's
// status.conditions; without either, live is ready as it exists.
func conditionReady(live object.Object) readiness {
	m, err := toMap(live)
	if err != nil {
		return readiness{failure: failedCheck, what: waitReady, why: fmt.Sprintf("decode: %v", err)}
	}
	conds, _, _ := unstructured.NestedSlice(m, "status", "conditions")
	for _, typ := range []string{waitReady, waitAvailable} {
		for _, c := range conds {
			cm, ok := c.(map[string]any)
			if !ok || cm["type"] != typ {
				continue
			}
			r := readiness{what: typ, ready: cm["status"] == string(metav1.ConditionTrue)}
			gen := live.GetGeneration()
			if g, ok := number(cm["observedGeneration"]); ok && int64(g) < gen {
				r.ready = false
			}
			if g, ok, _ := unstructured.NestedFieldNoCopy(m, "status", "observedGeneration"); ok {
				if n, isNum := number(g); isNum && int64(n) < gen {
					r.ready = false
				}
			}
			return r
		}
	}
	return readiness{what: waitCreated, ready: true}
}
