package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/bench/internal/report"
	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/namespaces"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/workqueue"
)

// newFleetManager returns the manager of the fleet workload: its clusters
// are the namespaces labelled workload.FleetLabel=true and the kubeconfig
// Secrets of workload.FleetSecrets, with the defaults of both providers and
// of cluster.Options. Its own cluster caches ConfigMaps of
// workload.FleetHome only (the other namespaces are clusters of their own),
// and it serves the debug page on a loopback port, from which "status"
// reads each cluster's queue waits.
func newFleetManager(cfg *rest.Config) (*framework.Manager, error) {
	sp, err := secrets.New(secrets.Options{Namespace: workload.FleetSecrets})
	if err != nil {
		return nil, err
	}
	np := namespaces.New(namespaces.Options{Labels: labels.SelectorFromSet(labels.Set{workload.FleetLabel: "true"})})
	cm := schema.GroupKind{Kind: "ConfigMap"}
	return framework.NewManager(cfg, framework.Options{
		Cache: informers.Options{ByKind: map[schema.GroupKind]informers.Selection{cm: {Namespace: workload.FleetHome}}},
		Clusters: cluster.Options{
			Providers: []cluster.Provider{np, sp},
			// The template of the clusters' caches, the defaults; given
			// so that the own cluster's ByKind is not copied into it.
			Cache: informers.Options{SyncTimeout: 2 * time.Minute},
		},
		Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
	})
}

// fleet counts each cluster's reconciles, for "status".
type fleet struct {
	mu         sync.Mutex
	reconciles map[string]int
}

// runFleet registers the controller of every cluster: each reconcile
// reports the ConfigMap it was handed; one carrying
// workload.PollAnnotation is read again through its cluster's API reader
// and reconciled again after the annotation's duration.
func runFleet(mgr *framework.Manager, opts framework.ControllerOptions) (*fleet, error) {
	f := &fleet{reconciles: map[string]int{}}
	opts.Clusters = cluster.Scope{Remote: true}
	err := framework.NewBuilder[*corev1.ConfigMap](mgr, "bench", opts).
		Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(ctx context.Context, obj *corev1.ConfigMap) (reconcile.Result, error) {
			c := cluster.From(ctx)
			f.mu.Lock()
			f.reconciles[c.Name()]++
			f.mu.Unlock()
			report.Seen(obj.Namespace, obj.Name, obj.ResourceVersion, workload.ConfigMapGen(obj))
			poll, ok := obj.Annotations[workload.PollAnnotation]
			if !ok {
				return reconcile.Result{}, nil
			}
			every, err := time.ParseDuration(poll)
			if err != nil {
				return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("ConfigMap %s/%s: annotation %s: %w", obj.Namespace, obj.Name, workload.PollAnnotation, err))
			}
			var live corev1.ConfigMap
			if err := c.APIReader().Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, &live); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{RequeueAfter: every}, nil
		}))
	return f, err
}

// status is the answer to the driver's "status": the clusters engaged and
// ready (the own one not counted), "state.<name>" of each, the goroutines, the cache's estimated
// bytes over every cluster, and per cluster "wait.<name>=<p99 ns>" (the
// controller's flow of that cluster, workqueue.FlowStats.WaitP99, as the
// debug page serves it), "held.<name>=<n>" (its keys workers hold) and
// "reconciles.<name>=<n>"; "-" names the manager's own cluster.
func (f *fleet) status(mgr *framework.Manager) string {
	var b strings.Builder
	ready, engaged := 0, 0
	var bytes int64
	var states []string
	for _, st := range mgr.Clusters().Stats() {
		bytes += st.Bytes
		if st.Cluster == "" {
			continue
		}
		if st.State == cluster.StateReady || st.State == cluster.StateUnhealthy {
			engaged++
		}
		states = append(states, fmt.Sprintf(" state.%s=%s", st.Cluster, st.State))
		if st.State == cluster.StateReady {
			ready++
		}
	}
	fmt.Fprintf(&b, "ready=%d engaged=%d goroutines=%d cacheBytes=%d%s", ready, engaged, runtime.NumGoroutine(), bytes, strings.Join(states, ""))
	if flows, err := flowStats(mgr.MetricsAddress()); err != nil {
		fmt.Fprintf(&b, " flowError=%s", strings.ReplaceAll(err.Error(), " ", "_"))
	} else {
		for _, fl := range flows {
			name := fl.Flow
			if name == "" {
				name = "-" // the manager's own cluster
			}
			fmt.Fprintf(&b, " wait.%s=%d held.%s=%d", name, int64(fl.WaitP99), name, fl.Held)
		}
	}
	f.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(f.reconciles)) {
		fmt.Fprintf(&b, " reconciles.%s=%d", name, f.reconciles[name])
	}
	f.mu.Unlock()
	return b.String()
}

// flowStats reads the debug page's state and returns the flows of the
// controller's queue, one per cluster.
func flowStats(addr string) ([]workqueue.FlowStats, error) {
	if addr == "" {
		return nil, fmt.Errorf("no metrics address yet")
	}
	res, err := http.Get("http://" + addr + introspect.Path + "api/state")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var st introspect.State
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decode the debug state: %w", err)
	}
	var out []workqueue.FlowStats
	for _, c := range st.Controllers {
		out = append(out, c.Flows...)
	}
	return out, nil
}
