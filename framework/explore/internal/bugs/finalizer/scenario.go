// Package finalizer ports a finalizer removed before its cleanup: the
// controller removes its finalizer, then deletes the DB's external
// resource; a crash (or a failed delete) between the two leaks the
// resource, because the DB is gone and no event will bring it back.
// Derived from Sieve's intermediate-state pattern (casskop#370's
// bookkeeping-after-the-destructive-write shape); see ../README.md.
package finalizer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
)

// name is the controller's finalizer.
const name = "bugs.converge.dev/backup"

// external is the namespace of the DBs' external records: a stand-in for
// a resource outside the cluster (a cloud backup bucket), which no owner
// reference can collect.
const external = "external"

// Options is the scenario: create two DBs, delete one; every external
// record must belong to a live DB once converged.
func Options(setup func(*framework.Manager) error) explore.Options {
	return explore.Options{
		Setup:  setup,
		Scheme: api.NewScheme(),
		Steps: []explore.Step{
			explore.Create(api.New("db", "shop", 1)),
			explore.Create(api.New("db", "blog", 1)),
			explore.Delete(api.New("db", "shop", 1)),
		},
		Converged: []explore.Invariant{{Name: "no external record outlives its DB", Check: noLeak}},
	}
}

func noLeak(ctx context.Context, s *explore.Snapshot) error {
	records, err := explore.List[*corev1.ConfigMap](ctx, s)
	if err != nil {
		return err
	}
	for _, r := range records {
		if r.Namespace != external {
			continue
		}
		key := types.NamespacedName{Namespace: r.Data["namespace"], Name: r.Data["name"]}
		if _, ok, err := explore.Get[*api.DB](ctx, s, key); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("external record %s of DB %s leaked: the DB is gone", r.Name, key)
		}
	}
	return nil
}

func record(db *api.DB) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: external, Name: db.Namespace + "." + db.Name},
		Data:       map[string]string{"namespace": db.Namespace, "name": db.Name},
	}
}
