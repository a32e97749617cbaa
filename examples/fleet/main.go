// Command fleet copies policies from the hub, the cluster it runs in, into
// every cluster a kubeconfig Secret engages (package cluster/secrets): each
// ConfigMap of the namespace labelled fleet.converge.dev/policy=true is
// applied into the same namespace of every engaged cluster, an edit or a
// deletion of a copy there is reverted, a cluster engaged later gets every
// policy once its cache synced, and a policy deleted from the hub is
// deleted from every cluster.
//
// The Secrets are those of the namespace labelled converge.dev/cluster=true,
// each holding a kubeconfig under data.kubeconfig; the cluster is named
// after the Secret. The hub is found as every converge program finds its
// cluster: $KUBECONFIG, ~/.kube/config or a pod's service account.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
)

// policyLabel marks the hub's ConfigMaps to copy, and the copies.
const policyLabel = "fleet.converge.dev/policy"

func main() {
	ns := flag.String("namespace", "fleet-system", "namespace of the kubeconfig Secrets and of the policies, in the hub and in every cluster")
	flag.Parse()
	if err := run(framework.SignalContext(context.Background()), *ns); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ns string) error {
	log, err := framework.NewLogger(framework.LogOptions{})
	if err != nil {
		return err
	}
	p, err := secrets.New(secrets.Options{Namespace: ns})
	if err != nil {
		return err
	}
	mgr, err := framework.NewManager(nil, framework.Options{
		Logger: log,
		// Every cluster's cache, the hub's and the others', holds the
		// policies of ns only: the client's reads and the watches below.
		Cache: informers.Options{Namespace: ns, ByKind: map[schema.GroupKind]informers.Selection{
			{Kind: "ConfigMap"}: {Labels: labels.SelectorFromSet(labels.Set{policyLabel: "true"})},
		}},
		Clusters: cluster.Options{Providers: []cluster.Provider{p}},
	})
	if err != nil {
		return err
	}
	// The hub's policies are the primary objects; the copies in the other
	// clusters map back to them, and a newly engaged cluster queues every
	// policy and every copy it holds.
	copies := framework.InOtherClusters(framework.Map(func(_ context.Context, cm *corev1.ConfigMap) []reconcile.Request {
		return []reconcile.Request{{Namespace: cm.Namespace, Name: cm.Name}}
	}), func(ctx context.Context) []reconcile.Request {
		return append(list(ctx, mgr.Client()), list(ctx, cluster.From(ctx).Client())...)
	})
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "fleet-policies", framework.ControllerOptions{}).
		Watches(copies).
		CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, copyPolicy(ctx, mgr, req)
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// copyPolicy applies the hub's policy req into every engaged cluster, or
// deletes it there when the hub has none.
func copyPolicy(ctx context.Context, mgr *framework.Manager, req reconcile.Request) error {
	policy := &corev1.ConfigMap{}
	err := mgr.Client().Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, policy)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	gone := err != nil
	var errs []error
	for _, name := range mgr.Clusters().Names()[1:] { // the hub, "", comes first
		c, err := mgr.Clusters().Get(name)
		if err != nil {
			continue // disengaged meanwhile
		}
		if gone {
			err = deleteCopy(ctx, c.Client(), req)
		} else {
			cm := corev1ac.ConfigMap(req.Name, req.Namespace).WithLabels(map[string]string{policyLabel: "true"}).WithData(policy.Data)
			_, err = c.Client().Apply(ctx, cm, client.FieldManager("fleet-policies"), client.ForceOwnership())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// deleteCopy deletes the copy of policy req that c holds, if any: only an
// object carrying policyLabel, which the cache holds, is deleted.
func deleteCopy(ctx context.Context, c *client.Client, req reconcile.Request) error {
	cp := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, cp)
	if err == nil {
		err = c.Delete(ctx, cp, client.MatchingUID(cp.UID))
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// list returns a request for every policy c holds.
func list(ctx context.Context, c *client.Client) []reconcile.Request {
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms); err != nil {
		return nil // the cache is synced: this does not fail
	}
	reqs := make([]reconcile.Request, 0, len(cms.Items))
	for _, cm := range cms.Items {
		reqs = append(reqs, reconcile.Request{Namespace: cm.Namespace, Name: cm.Name})
	}
	return reqs
}
