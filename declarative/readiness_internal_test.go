package declarative

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/object"
)

func TestBuiltinReadiness(t *testing.T) {
	gen := metav1.ObjectMeta{Generation: 2}
	availableDeploy := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	stale := availableDeploy
	stale.ObservedGeneration = 1
	rolling := availableDeploy
	rolling.Replicas = 2 // an old replica left
	pastDeadline := func(observed int64) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: 1, UpdatedReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}}
	}
	cr := func(status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Database",
			"metadata": map[string]any{"name": "db", "generation": int64(3)}, "status": status}}
		return u
	}
	for _, tc := range []struct {
		name   string
		obj    object.Object
		ready  bool
		failed bool
		what   string
	}{
		{"Deployment available", &appsv1.Deployment{ObjectMeta: gen, Status: availableDeploy}, true, false, "Available"},
		{"Deployment not observed", &appsv1.Deployment{ObjectMeta: gen, Status: stale}, false, false, "Available"},
		{"Deployment rolling out", &appsv1.Deployment{ObjectMeta: gen, Status: rolling}, false, false, "Available"},
		{"Deployment without Available", &appsv1.Deployment{ObjectMeta: gen, Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}, false, false, "Available"},
		{"Deployment past its progress deadline", &appsv1.Deployment{ObjectMeta: gen, Status: pastDeadline(2)}, false, true, "Available"},
		{"Deployment past the deadline of an older generation", &appsv1.Deployment{ObjectMeta: gen, Status: pastDeadline(1)}, false, false, "Available"},
		{"StatefulSet ready", &appsv1.StatefulSet{ObjectMeta: gen, Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}}, true, false, "Ready"},
		{"StatefulSet not updated", &appsv1.StatefulSet{ObjectMeta: gen, Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 1, AvailableReplicas: 1}}, false, false, "Ready"},
		{"DaemonSet available", &appsv1.DaemonSet{ObjectMeta: gen, Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}}, true, false, "Available"},
		{"DaemonSet partly available", &appsv1.DaemonSet{ObjectMeta: gen, Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 2}}, false, false, "Available"},
		{"Job complete", &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}, true, false, "Complete"},
		{"Job running", &batchv1.Job{}, false, false, "Complete"},
		{"Job failed", &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}, false, true, "Complete"},
		{"PVC bound", &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}, true, false, "Bound"},
		{"PVC pending", &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}, false, false, "Bound"},
		{"PVC lost", &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}}, false, true, "Bound"},
		{"ClusterIP Service", &corev1.Service{}, true, false, "created"},
		{"LoadBalancer without ingress", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}, false, false, "load balancer ingress"},
		{"LoadBalancer with ingress", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}, Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}}}}, true, false, "load balancer ingress"},
		{"Pod ready", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}, true, false, "Ready"},
		{"Pod pending", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, false, false, "Ready"},
		{"Pod failed", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, false, true, "Ready"},
		{"ConfigMap", &corev1.ConfigMap{}, true, false, "created"},
		{"custom resource Ready", cr(map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(3)}}}), true, false, "Ready"},
		{"custom resource Ready for an older generation", cr(map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(2)}}}), false, false, "Ready"},
		{"custom resource status observedGeneration old", cr(map[string]any{"observedGeneration": int64(2), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}), false, false, "Ready"},
		{"custom resource Available", cr(map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}), true, false, "Available"},
		{"custom resource not Ready", cr(map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}), false, false, "Ready"},
		{"custom resource without conditions", cr(nil), true, false, "created"},
	} {
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(tc.obj)
		gk := schema.GroupKind{Group: "example.com", Kind: "Database"}
		if err == nil {
			gk = gvks[0].GroupKind()
		}
		check := func(how string, obj object.Object) {
			got := readinessOf(gk, obj)
			if got.ready != tc.ready || got.failed() != tc.failed || got.what != tc.what {
				t.Errorf("%s (%s): readiness = %+v, want ready %v, failed %v, what %q", tc.name, how, got, tc.ready, tc.failed, tc.what)
			}
		}
		check("typed", tc.obj)
		if _, ok := tc.obj.(*unstructured.Unstructured); !ok {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			check("unstructured", &unstructured.Unstructured{Object: m})
		}
	}
}

func TestWavesGroupChildrenByDependencyDepth(t *testing.T) {
	// Apply order A, B (After A), C, D (After B and C), E: A, C and E
	// depend on nothing and go first, together.
	g := &graph{vertices: []vertex{{}, {after: []int{0}}, {}, {after: []int{1, 2}}, {}}}
	if got, want := g.waves(5), [][]int{{0, 2, 4}, {1}, {3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("waves = %v, want %v", got, want)
	}
	var none *graph
	if got, want := none.waves(3), [][]int{{0, 1, 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("waves without a graph = %v, want %v", got, want)
	}
	if got := none.waves(0); got != nil {
		t.Errorf("waves of no children = %v, want none", got)
	}
}
