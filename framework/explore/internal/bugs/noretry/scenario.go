// Package noretry ports a swallowed write error (redpanda-data/redpanda
// #980): the status update's error is logged and the reconcile reports
// success, and since the controller wakes only on spec changes
// (GenerationChanged), nothing brings the DB back after a 409 Conflict:
// its status stays behind forever. See ../README.md.
package noretry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
)

// Options is the scenario: create a DB, scale it twice; its status must
// describe its latest spec once converged.
func Options(setup func(*framework.Manager) error) explore.Options {
	key := types.NamespacedName{Namespace: "db", Name: "shop"}
	scale := func(n int32) explore.Step {
		s := explore.Update(key, func(db *api.DB) { db.Spec.Replicas = n })
		s.Name = fmt.Sprintf("scale db/shop to %d", n)
		return s
	}
	return explore.Options{
		Setup:     setup,
		Scheme:    api.NewScheme(),
		Steps:     []explore.Step{explore.Create(api.New("db", "shop", 1)), scale(3), scale(5)},
		Converged: []explore.Invariant{{Name: "status.observedGeneration is the generation", Check: observed}},
	}
}

func observed(ctx context.Context, s *explore.Snapshot) error {
	dbs, err := explore.List[*api.DB](ctx, s)
	if err != nil {
		return err
	}
	for _, db := range dbs {
		if db.Status.ObservedGeneration != db.Generation || db.Status.Replicas != db.Spec.Replicas {
			return fmt.Errorf("DB %s/%s: status observed generation %d with %d replicas; it is at generation %d with %d",
				db.Namespace, db.Name, db.Status.ObservedGeneration, db.Status.Replicas, db.Generation, db.Spec.Replicas)
		}
	}
	return nil
}

func status(db *api.DB) *api.DB {
	db = db.DeepCopy()
	db.Status = api.DBStatus{ObservedGeneration: db.Generation, Replicas: db.Spec.Replicas}
	return db
}
