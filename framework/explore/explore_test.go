package explore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// mirror is a controller that keeps a Secret "<name>-mirror" per
// ConfigMap, owned by it and holding its data; create says how it
// creates the Secret.
func mirror(idempotent bool) func(*framework.Manager) error {
	return func(mgr *framework.Manager) error {
		c := mgr.Client()
		return framework.NewBuilder[*corev1.ConfigMap](mgr, "mirror", framework.ControllerOptions{}).
			Owns(&corev1.Secret{}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
				if cm.DeletionTimestamp != nil {
					return reconcile.Result{}, nil
				}
				s := &corev1.Secret{}
				err := c.Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name + "-mirror"}, s)
				switch {
				case apierrors.IsNotFound(err):
					s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + "-mirror",
						OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}},
						StringData: cm.Data}
					err = c.Create(ctx, s)
					if idempotent && apierrors.IsAlreadyExists(err) {
						err = nil
					}
					return reconcile.Result{}, err
				case err != nil:
					return reconcile.Result{}, err
				}
				return reconcile.Result{}, nil
			}))
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"k": "v"}}
}

// eachHasMirror: each ConfigMap of namespace ns (the scenarios') has its
// mirror.
var eachHasMirror = explore.Invariant{Name: "each ConfigMap has its mirror Secret", Check: func(ctx context.Context, s *explore.Snapshot) error {
	cms, err := explore.List[*corev1.ConfigMap](ctx, s, informers.InNamespace("ns"))
	if err != nil {
		return err
	}
	var missing []string
	for _, cm := range cms {
		if _, ok, err := explore.Get[*corev1.Secret](ctx, s, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name + "-mirror"}); err != nil {
			return err
		} else if !ok {
			missing = append(missing, cm.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no mirror for %s", strings.Join(missing, ", "))
	}
	return nil
}}

func TestExplorerPassesACorrectController(t *testing.T) {
	explore.Run(t, explore.Options{
		Setup:     mirror(true),
		Steps:     []explore.Step{explore.Create(configMap("a")), explore.Create(configMap("b")), explore.Delete(configMap("a"))},
		Converged: []explore.Invariant{eachHasMirror},
		Schedules: 20,
	})
}
