// Package ownerref ports an owner reference set after the child's
// creation: Create, then SetControllerReference and Update. A crash (or a
// failed update) between the two leaves a child that no owner claims and
// garbage collection never removes. Derived from Sieve's
// intermediate-state pattern (K8SPSMDB-578's shape); see ../README.md.
package ownerref

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
)

// Options is the scenario: create a DB, scale it, delete it; every
// Secret must be controlled by a DB once converged.
func Options(setup func(*framework.Manager) error) explore.Options {
	return explore.Options{
		Setup:  setup,
		Scheme: api.NewScheme(),
		Steps: []explore.Step{
			explore.Create(api.New("db", "shop", 1)),
			explore.Create(api.New("db", "blog", 1)),
			explore.Delete(api.New("db", "shop", 1)),
		},
		Converged: []explore.Invariant{{Name: "every Secret is controlled by a DB", Check: owned}},
	}
}

func owned(ctx context.Context, s *explore.Snapshot) error {
	secrets, err := explore.List[*corev1.Secret](ctx, s)
	if err != nil {
		return err
	}
	for _, sec := range secrets {
		// A controller that is gone is fine: the garbage collector deletes
		// the Secret (the fake API server collects only at the owner's
		// deletion; a cluster's collector also finds dangling references).
		if ref := metav1.GetControllerOf(sec); ref == nil || ref.Kind != "DB" {
			return fmt.Errorf("Secret %s/%s has no DB as its controller: nothing will ever delete it", sec.Namespace, sec.Name)
		}
	}
	return nil
}

func newConfig(db *api.DB) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name + "-config"}, StringData: map[string]string{"replicas": fmt.Sprint(db.Spec.Replicas)}}
}
