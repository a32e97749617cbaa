package envtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
