// Package staledelete ports a delete driven by a stale read
// (rabbitmq/cluster-operator#648; same shape: pravega/zookeeper-operator
// #312): the controller deletes a DB's backup when its cache has no such
// DB, and a cache that has not yet seen a new DB deletes the backup of a
// live one. The end state shows no error anywhere; only the delete-count
// oracle (more deletes than in the fault-free schedule), as Sieve's,
// sees it. See ../README.md.
package staledelete

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// dbLabel names the DB a backup ConfigMap belongs to.
const dbLabel = "bugs.converge.dev/db"

// Options is the scenario: a user creates a DB, then its backup; then a
// second DB and its backup. Faults: Lag only (the bug needs a stale read).
func Options(setup func(*framework.Manager) error) explore.Options {
	return explore.Options{
		Setup:  setup,
		Scheme: api.NewScheme(),
		Steps: []explore.Step{
			explore.Create(api.New("db", "shop", 1)),
			explore.Create(backup("shop")),
			explore.Create(api.New("db", "blog", 1)),
			explore.Create(backup("blog")),
		},
		Faults: explore.FaultOptions{Kinds: []explore.FaultKind{explore.Lag}},
	}
}

func backup(db string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: db + "-backup", Labels: map[string]string{dbLabel: db}}}
}

// builder watches backups, and DBs for their backups.
func builder(mgr *framework.Manager) *framework.Builder[*corev1.ConfigMap] {
	return framework.NewBuilder[*corev1.ConfigMap](mgr, "backup", framework.ControllerOptions{}).
		Watches(framework.Map(func(_ context.Context, db *api.DB) []reconcile.Request {
			return []reconcile.Request{{Namespace: db.Namespace, Name: db.Name + "-backup"}}
		}))
}

func dbOf(cm *corev1.ConfigMap) (types.NamespacedName, bool) {
	name, ok := cm.Labels[dbLabel]
	return types.NamespacedName{Namespace: cm.Namespace, Name: name}, ok
}
