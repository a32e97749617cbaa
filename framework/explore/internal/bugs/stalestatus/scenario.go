// Package stalestatus ports a status computed from a stale child: the DB
// copies its StatefulSet's ready replicas into its status from the cache,
// and wakes for the StatefulSet only when its generation changes (a
// common predicate). When the DB changes before the cache has seen the
// StatefulSet's rollout, the status keeps the old count forever. Derived
// from rabbitmq/cluster-operator#653's stale-state shape (Sieve); see
// ../README.md.
package stalestatus

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
)

var key = types.NamespacedName{Namespace: "db", Name: "shop"}

// Options is the scenario: a user creates a DB; the StatefulSet
// controller (which the fake API server does not run: the scenario plays
// it) reports its replicas ready; the user annotates the DB. Once the
// scenario ran, the DB's status must show the StatefulSet's ready
// replicas. Faults: Lag only.
func Options(setup func(*framework.Manager) error) explore.Options {
	annotate := explore.Update(key, func(db *api.DB) { metav1.SetMetaDataAnnotation(&db.ObjectMeta, "owner", "team-a") })
	annotate.Name = "annotate db/shop"
	return explore.Options{
		Setup:  setup,
		Scheme: api.NewScheme(),
		Steps: []explore.Step{
			explore.Create(api.New("db", "shop", 2)),
			{Name: "the StatefulSet controller reports its replicas ready", Do: rollOut},
			annotate,
		},
		Converged: []explore.Invariant{{Name: "the DB's status shows its StatefulSet's ready replicas", Check: readyShown}},
		Faults:    explore.FaultOptions{Kinds: []explore.FaultKind{explore.Lag}},
	}
}

func rollOut(ctx context.Context, c *client.Client) error {
	for {
		var sts appsv1.StatefulSet
		if err := c.Get(ctx, key, &sts); err != nil {
			return err
		}
		sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: *sts.Spec.Replicas, ReadyReplicas: *sts.Spec.Replicas}
		err := c.Status().Update(ctx, &sts)
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

func readyShown(ctx context.Context, s *explore.Snapshot) error {
	if s.Steps() < 3 {
		return nil // the DB reports its StatefulSet when the DB changes
	}
	db, ok, err := explore.Get[*api.DB](ctx, s, key)
	if err != nil || !ok {
		return err
	}
	sts, ok, err := explore.Get[*appsv1.StatefulSet](ctx, s, key)
	if err != nil || !ok {
		return err
	}
	if db.Status.Replicas != sts.Status.ReadyReplicas {
		return fmt.Errorf("DB %s shows %d ready replicas, its StatefulSet has %d", key, db.Status.Replicas, sts.Status.ReadyReplicas)
	}
	return nil
}

// statefulSet is the DB's StatefulSet.
func statefulSet(db *api.DB) *appsv1.StatefulSet {
	labels := map[string]string{"db": db.Name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name, OwnerReferences: []metav1.OwnerReference{api.ControllerRef(db)}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(db.Spec.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:1"}}},
			},
		},
	}
}

// reconcileDB ensures the StatefulSet and copies its ready replicas,
// as read from the cache, into the DB's status.
func reconcileDB(ctx context.Context, c *client.Client, db *api.DB) error {
	var sts appsv1.StatefulSet
	if err := c.Get(ctx, types.NamespacedName{Namespace: db.Namespace, Name: db.Name}, &sts); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		if err := c.Create(ctx, statefulSet(db)); err != nil {
			return err
		}
		return nil // the StatefulSet's creation brings the DB back
	}
	if db.Status.Replicas == sts.Status.ReadyReplicas && db.Status.ObservedGeneration == db.Generation {
		return nil
	}
	db = db.DeepCopy()
	db.Status = api.DBStatus{ObservedGeneration: db.Generation, Replicas: sts.Status.ReadyReplicas}
	return c.Status().Update(ctx, db)
}
