package main

// A member of spread clusters (--clusters): its manager's provider engages
// each namespace labelled report.ClusterLabel=<--clusters> as a cluster,
// and a controller of many clusters copies data.v of ConfigMap
// report.Source into ConfigMap report.Copy (which the suite creates), in
// each cluster, setting the copy's report.ObservedAnnotation to it. With
// --ring the clusters are spread over that ring (sharding.Options.Clusters,
// Leases in --namespace); without, every member engages every cluster.
//
// It reports to the referee each engagement and disengagement its
// cluster.Listener hears (report.Engagement), each reconcile of a cluster's
// source as a bucket member does (the key is the cluster's name; ReadRV is
// the copy's resourceVersion as read, WriteRV the one its write produced;
// a write refused for a cluster no longer held is Fenced), and every 50 ms
// its ring status with the clusters it serves and whether its /readyz
// passes.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/namespaces"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
	"github.com/converge-dev/converge/test/sharding/report"
)

func runSpread(ctx context.Context, o options, log logr.Logger, cfg *rest.Config) error {
	sh := sharding.Options{}
	if o.ring != "" {
		sh = sharding.Options{Ring: o.ring, Clusters: true, Lease: lease.Options{Namespace: o.namespace, Identity: o.identity,
			Duration: o.lease, RenewDeadline: o.lease * 3 / 4, RetryPeriod: o.lease / 8}}
	}
	p := namespaces.New(namespaces.Options{Labels: labels.SelectorFromSet(labels.Set{report.ClusterLabel: o.clusters})})
	mgr, err := framework.NewManager(cfg, framework.Options{
		Logger:                  log,
		Sharding:                sh,
		Clusters:                cluster.Options{Providers: []cluster.Provider{p}},
		HealthProbeBindAddress:  "127.0.0.1:0",
		GracefulShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	m := &member{mgr: mgr, identity: o.identity, referee: strings.TrimSuffix(o.referee, "/"), work: o.work,
		http: &http.Client{Timeout: 30 * time.Second}}
	mgr.Clusters().Subscribe(engagements{m})
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "copier", framework.ControllerOptions{Workers: o.workers, Clusters: cluster.Scope{Remote: true}}).
		CompleteByKey(reconcile.Func(m.copy))
	if err != nil {
		return err
	}
	go m.reportSpread(ctx)
	return mgr.Start(ctx)
}

// engagements is a member's cluster.Listener: it reports each engagement
// and disengagement of a cluster other than the manager's own, before it
// returns.
type engagements struct{ m *member }

func (e engagements) Engaged(c *cluster.Cluster)    { e.report(c, true) }
func (e engagements) Disengaged(c *cluster.Cluster) { e.report(c, false) }

func (e engagements) report(c *cluster.Cluster, engaged bool) {
	if c.Name() == "" {
		return
	}
	e.m.post(context.Background(), "/engagement", report.Engagement{Member: e.m.identity, Process: os.Getpid(), Cluster: c.Name(), Engaged: engaged, At: time.Now().UnixNano()})
}

// copy reconciles a cluster's source: it copies data.v into the copy,
// through the cluster's client, unless the copy's annotation holds it.
// Keys of the manager's own cluster and of other ConfigMaps are skipped.
func (m *member) copy(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Cluster == "" || req.Name != report.Source {
		return reconcile.Result{}, nil
	}
	c := cluster.From(ctx)
	var src corev1.ConfigMap
	if err := c.Client().Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, &src); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	id := m.ids.Add(1)
	rctx := context.WithoutCancel(ctx)
	m.post(rctx, "/enter", report.Enter{Member: m.identity, Process: os.Getpid(), ID: id, Key: req.Cluster, At: time.Now().UnixNano()})
	exit := report.Exit{Member: m.identity, Process: os.Getpid(), ID: id, Value: src.Data["v"]}
	defer func() { m.post(rctx, "/exit", exit) }()

	var cp corev1.ConfigMap
	err := c.Client().Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: report.Copy}, &cp)
	if err == nil {
		exit.ReadRV = cp.ResourceVersion
		if cp.Annotations[report.ObservedAnnotation] == exit.Value {
			exit.Outcome, exit.End = report.Unchanged, time.Now().UnixNano()
			return reconcile.Result{}, nil
		}
		if !m.worked(ctx) {
			exit.Outcome, exit.End = report.Cancelled, time.Now().UnixNano()
			return reconcile.Result{}, ctx.Err()
		}
		err = m.writeCopy(ctx, c, &cp, exit.Value)
	}
	exit.End = time.Now().UnixNano()
	exit.Outcome, exit.WriteRV, exit.Err = outcome(ctx, err, cp.ResourceVersion)
	return reconcile.Result{}, err
}

// writeCopy merge-patches cp, as read, with value: the framework makes
// the patch conditional on cp's resourceVersion when the ring spreads the
// clusters. cp holds what the server answered.
func (m *member) writeCopy(ctx context.Context, c *cluster.Cluster, cp *corev1.ConfigMap, value string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{report.ObservedAnnotation: value}},
		"data":     map[string]string{"v": value},
	})
	if err != nil {
		return err
	}
	return c.Client().Patch(ctx, cp, types.MergePatchType, patch)
}

// reportSpread reports the ring status, the clusters served and readiness
// every 50 ms until ctx ends.
func (m *member) reportSpread(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s := report.Status{Member: m.identity, At: time.Now().UnixNano()}
		if st, ok := m.mgr.RingStatus(); ok {
			s.Members, s.Refused = st.Members, st.Refused
			if st.Clusters != nil {
				s.Clusters = st.Clusters.Serving
			}
		}
		s.Ready, s.Unready = m.ready(ctx)
		m.post(ctx, "/status", s)
	}
}

// ready probes the manager's /readyz; when it fails, what it answered.
func (m *member) ready(ctx context.Context) (bool, string) {
	addr := m.mgr.HealthProbeAddress()
	if addr == "" {
		return false, "no health probe address yet"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz?verbose", nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return false, strings.TrimSpace(string(body))
	}
	return true, ""
}
