package framework_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

// A manager with one controller: the configuration comes from the kubeconfig
// or the pod's service account, and Start runs until ctx is cancelled.
func ExampleManager() {
	ctx := context.Background() // in main: signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)

	mgr, err := framework.NewManager(nil, framework.Options{})
	if err != nil {
		fmt.Println(err) // e.g. framework.ErrNoConfig
		return
	}
	err = framework.NewBuilder[*corev1.Pod](mgr, "pod-phases", framework.ControllerOptions{}).
		Complete(reconcile.ObjectFunc[*corev1.Pod](func(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
			logr.FromContextOrDiscard(ctx).Info("pod", "phase", pod.Status.Phase)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Println(err)
	}
}

// A controller for Deployments that also reacts to its ReplicaSets (owned
// objects) and to ConfigMaps named in an annotation (a mapped watch), only for
// spec changes of the Deployment itself, with four workers.
func ExampleNewBuilder() {
	mgr, err := framework.NewManager(nil, framework.Options{})
	if err != nil {
		return
	}
	byConfig := framework.Map(func(ctx context.Context, cm *corev1.ConfigMap) []reconcile.Request {
		if name := cm.Annotations["example.com/deployment"]; name != "" {
			return []reconcile.Request{{Namespace: cm.Namespace, Name: name}}
		}
		return nil
	})
	err = framework.NewBuilder[*appsv1.Deployment](mgr, "deployments", framework.ControllerOptions{Workers: 4}).
		WithPredicates(framework.GenerationChanged).
		Owns(&appsv1.ReplicaSet{}).
		Watches(byConfig).
		Complete(reconcile.ObjectFunc[*appsv1.Deployment](func(ctx context.Context, d *appsv1.Deployment) (reconcile.Result, error) {
			if d.Spec.Paused {
				return reconcile.Result{RequeueAfter: time.Minute}, nil
			}
			return reconcile.Result{}, nil
		}))
	fmt.Println(err)
}

// A key-based reconciler reads what it needs through the manager's client,
// which reads from the shared cache.
func ExampleBuilder_CompleteByKey() {
	mgr, err := framework.NewManager(nil, framework.Options{})
	if err != nil {
		return
	}
	c := mgr.Client()
	err = framework.NewBuilder[*corev1.Service](mgr, "services", framework.ControllerOptions{}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var svc corev1.Service
			if err := c.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, &svc); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, nil
		}))
	fmt.Println(err)
}

// A predicate built from a label selector: only ConfigMaps of team "web"
// (and those that just left it) reconcile.
func ExampleLabelSelectorMatch() {
	web, err := framework.LabelSelectorMatch[*corev1.ConfigMap](metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, labels := range []map[string]string{{"team": "web"}, {"team": "db"}} {
		e := framework.Change[*corev1.ConfigMap]{Type: framework.Added, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: labels}}}
		fmt.Println(labels["team"], web(e))
	}
	// Output:
	// web true
	// db false
}

// Reads the cache cannot serve go straight to the API server: here a
// ConfigMap in another namespace than the one the cache holds, read without
// creating an informer (the identity needs only get on it, not list and
// watch).
func ExampleManager_APIReader() {
	mgr, err := framework.NewManager(nil, framework.Options{Cache: informers.Options{Namespace: "apps"}})
	if err != nil {
		return
	}
	err = framework.NewBuilder[*corev1.Service](mgr, "services", framework.ControllerOptions{}).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var settings corev1.ConfigMap
			key := types.NamespacedName{Namespace: "platform", Name: "settings"}
			if err := mgr.APIReader().Get(ctx, key, &settings); err != nil {
				return reconcile.Result{}, err
			}
			var all corev1.ConfigMapList
			if err := mgr.APIReader().List(ctx, &all, informers.InNamespace("platform")); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, nil
		}))
	fmt.Println(err)
}

// A controller that owns Secrets but reads only their metadata: the cache
// holds no Secret data. Its Deployments are also reconciled every ten
// minutes without any change, behind real changes in the queue.
func ExampleBuilder_OwnsMetadata() {
	mgr, err := framework.NewManager(nil, framework.Options{})
	if err != nil {
		return
	}
	err = framework.NewBuilder[*appsv1.Deployment](mgr, "deployments", framework.ControllerOptions{ResyncPeriod: 10 * time.Minute}).
		OwnsMetadata(&corev1.Secret{}).
		Complete(reconcile.ObjectFunc[*appsv1.Deployment](func(ctx context.Context, d *appsv1.Deployment) (reconcile.Result, error) {
			var secrets metav1.PartialObjectMetadataList
			secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
			if err := mgr.Client().List(ctx, &secrets, informers.InNamespace(d.Namespace)); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, nil
		}))
	fmt.Println(err)
}

// Admission webhooks for Deployments (defaults and validation) served by
// the manager on Options.Webhook's address (":9443" by default) with the
// certificate of its CertDir. For conversion, see AddConversion.
func ExampleAddWebhook() {
	mgr, err := framework.NewManager(nil, framework.Options{
		Webhook: framework.WebhookServerOptions{CertDir: "/tmp/k8s-webhook-server/serving-certs"},
	})
	if err != nil {
		return
	}
	err = framework.AddWebhook(mgr, framework.WebhookOptions[*appsv1.Deployment]{
		Defaulter: webhook.DefaulterFunc[*appsv1.Deployment](func(_ context.Context, d *appsv1.Deployment) error {
			if d.Spec.RevisionHistoryLimit == nil {
				limit := int32(3)
				d.Spec.RevisionHistoryLimit = &limit
			}
			return nil
		}),
		Validator: webhook.ValidatorFuncs[*appsv1.Deployment]{
			Create: func(_ context.Context, d *appsv1.Deployment) (webhook.Warnings, error) {
				if d.Labels["team"] == "" {
					return nil, fmt.Errorf("deployment %s needs a team label", d.Name)
				}
				return nil, nil
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = mgr.Start(context.Background())
}

// Replicas of one manager share a sharding ring: each reconciles the
// Deployments of the buckets it holds. Sharded by namespace, the
// ReplicaSets a Deployment owns, and the Secrets a SameNamespace map
// watches, are cached per held bucket too: each replica caches its own
// namespaces only. Run every replica with the same Ring.
func ExampleControllerOptions_sharded() {
	ctx := context.Background()
	mgr, err := framework.NewManager(nil, framework.Options{
		Sharding: sharding.Options{Ring: "deployments", Buckets: sharding.Buckets{By: sharding.ByNamespace}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	secretUsers := func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
		return []reconcile.Request{{Namespace: s.Namespace, Name: s.Labels["app"]}}
	}
	err = framework.NewBuilder[*appsv1.Deployment](mgr, "deployments", framework.ControllerOptions{Sharded: true}).
		Owns(&appsv1.ReplicaSet{}).
		Watches(framework.SameNamespace(framework.Map(secretUsers))).
		Complete(reconcile.ObjectFunc[*appsv1.Deployment](func(ctx context.Context, d *appsv1.Deployment) (reconcile.Result, error) {
			b, of, _ := sharding.BucketFrom(ctx)
			logr.FromContextOrDiscard(ctx).Info("reconciling", "bucket", b, "of", of.Count)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Println(err)
	}
}
