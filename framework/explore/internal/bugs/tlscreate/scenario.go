// Package tlscreate ports a non-idempotent creation across a crash
// (Percona Server for MongoDB operator, K8SPSMDB-578, found by Sieve): one
// existence check guards two creates, so a crash between them leaves the
// second object missing forever. See ../README.md.
package tlscreate

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

// Options is the scenario: create two DBs, scale one; each DB must have
// both TLS Secrets once converged.
func Options(setup func(*framework.Manager) error) explore.Options {
	return explore.Options{
		Setup:  setup,
		Scheme: api.NewScheme(),
		Steps: []explore.Step{
			explore.Create(api.New("db", "shop", 1)),
			explore.Create(api.New("db", "blog", 1)),
		},
		Converged: []explore.Invariant{{Name: "each DB has both TLS Secrets", Check: bothSecrets}},
	}
}

func bothSecrets(ctx context.Context, s *explore.Snapshot) error {
	dbs, err := explore.List[*api.DB](ctx, s)
	if err != nil {
		return err
	}
	for _, db := range dbs {
		for _, suffix := range []string{"-ssl", "-ssl-internal"} {
			_, ok, err := explore.Get[*corev1.Secret](ctx, s, types.NamespacedName{Namespace: db.Namespace, Name: db.Name + suffix})
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("DB %s/%s has no Secret %s%s", db.Namespace, db.Name, db.Name, suffix)
			}
		}
	}
	return nil
}

func newCert(db *api.DB, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: name, OwnerReferences: []metav1.OwnerReference{api.ControllerRef(db)}},
		StringData: map[string]string{"tls.crt": "cert of " + name},
	}
}
