package envtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestControllerManagerCollectsGarbage(t *testing.T) {
	t.Parallel()
	_, cfg := startEnv(t, envtest.Options{ControllerManager: true})
	ctx := t.Context()
	cs := clientset(t, cfg)
	ns := newNamespace(t, cs)
	cms := cs.CoreV1().ConfigMaps(ns)

	owner, err := cms.Create(ctx, configMap(ns, "owner", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create owner: %v", err)
	}
	child := configMap(ns, "child", nil)
	child.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	if _, err := cms.Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create child: %v", err)
	}

	background := metav1.DeletePropagationBackground
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatalf("delete owner: %v", err)
	}
	start := time.Now()
	eventually(t, time.Minute, "the garbage collector deletes the child", func(ctx context.Context) error {
		_, err := cms.Get(ctx, "child", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("child still exists"), err)
	})
	t.Logf("child collected %v after its owner was deleted", time.Since(start).Round(time.Millisecond))

	// The TTL-after-finished controller deletes a Job that finished (as
	// its status says: no controller runs it) once its TTL has passed.
	jobs := cs.BatchV1().Jobs(ns)
	job, err := jobs.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Spec: batchv1.JobSpec{
		TTLSecondsAfterFinished: new(int32(0)),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job: %v", err)
	}
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}}
	if _, err := jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("complete Job: %v", err)
	}
	eventually(t, time.Minute, "the TTL-after-finished controller deletes the Job", func(ctx context.Context) error {
		_, err := jobs.Get(ctx, "done", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("Job still exists"), err)
	})

	// The namespace controller empties and removes a deleted namespace.
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	eventually(t, time.Minute, "the namespace controller removes the namespace", func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("namespace still exists"), err)
	})
}
