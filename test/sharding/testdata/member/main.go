// Command member is one member process of the sharding suite: a manager
// whose controller reconciles the ConfigMaps of one namespace named with
// --prefix, and reports each reconcile to the suite's referee over HTTP.
//
// A reconcile reports enter; unless the annotation report.ObservedAnnotation
// already holds the value of data.v it saw, it works for --work, then
// writes that value into the annotation through the manager's client (so a
// sharded controller's fence applies); it reports exit with the outcome
// (package report lists them), the resourceVersion it read and the one its
// write produced.
//
// With --ring the controller is sharded on that ring, and every 50 ms the
// member reports its ring status and how many of the objects its cache
// holds (read through the manager's client, which reads the held buckets).
// Without --ring it is neither sharded nor leader-elected: every replica
// reconciles every object. --buckets sets the ring's Buckets.Count;
// --kind=secrets makes the sharded controller one of Secrets that reports
// and writes nothing (another program on the ring); --server sends every
// request to that URL instead of the kubeconfig's server (a proxy);
// --no-preconditions turns off the preconditions of the sharded
// reconciles' writes (a negative control).
//
// With --clusters=VALUE the member is instead a controller of many
// clusters, each namespace labelled report.ClusterLabel=VALUE one
// (cluster/namespaces); with --ring too it spreads them over the ring
// (sharding.Options.Clusters). spread.go says what it reports.
//
// It stops on SIGTERM through framework.SignalContext and exits 0 when
// Manager.Start returns nil.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/shardtest"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
	"github.com/converge-dev/converge/test/sharding/report"
)

type member struct {
	mgr      *framework.Manager
	identity string
	referee  string
	prefix   string
	work     time.Duration
	ids      atomic.Int64
	http     *http.Client
}

// options are the member's flags.
type options struct {
	kubeconfig, namespace, prefix, referee, identity, ring string
	lease, work                                            time.Duration
	workers, buckets                                       int
	kind, server                                           string
	noPreconditions                                        bool
	// clusters, when set, makes the member one of spread clusters.
	clusters string
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster")
	flag.StringVar(&o.namespace, "namespace", "", "namespace whose ConfigMaps are reconciled")
	flag.StringVar(&o.prefix, "prefix", "obj-", "only ConfigMaps whose names start with this are reconciled")
	flag.StringVar(&o.referee, "referee", "", "base URL of the referee")
	flag.StringVar(&o.identity, "identity", "", "the member's identity (on the ring, and to the referee)")
	flag.StringVar(&o.ring, "ring", "", "shard the controller on this ring; empty: neither sharded nor leader-elected")
	flag.DurationVar(&o.lease, "lease", 4*time.Second, "the ring's LeaseDuration (RenewDeadline 3/4 of it, RetryPeriod 1/8)")
	flag.IntVar(&o.workers, "workers", 4, "workers")
	flag.DurationVar(&o.work, "work", 20*time.Millisecond, "how long a reconcile that writes works before it writes")
	flag.IntVar(&o.buckets, "buckets", 0, "the ring's Buckets.Count (0: the default)")
	flag.StringVar(&o.kind, "kind", "configmaps", "the kind the controller reconciles: configmaps or secrets (which it only reads)")
	flag.StringVar(&o.server, "server", "", "send every request to this URL instead of the kubeconfig's server")
	flag.BoolVar(&o.noPreconditions, "no-preconditions", false, "send the sharded reconciles' writes without preconditions (a negative control)")
	flag.StringVar(&o.clusters, "clusters", "", "copy a ConfigMap in each namespace labelled "+report.ClusterLabel+"=VALUE, each a cluster (spread over --ring, if set)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.referee == "" || o.identity == "" {
		return errors.New("--referee and --identity are required")
	}
	if o.noPreconditions {
		shardtest.DisablePreconditions()
	}
	ctx := framework.SignalContext(context.Background())
	log, err := framework.NewLogger(framework.LogOptions{})
	if err != nil {
		return err
	}
	cfg, err := framework.LoadConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	if o.server != "" {
		cfg.Host = o.server
	}
	if o.clusters != "" {
		return runSpread(ctx, o, log, cfg)
	}
	sharding := sharding.Options{Ring: o.ring, Buckets: sharding.Buckets{Count: o.buckets}, Lease: lease.Options{Namespace: o.namespace, Identity: o.identity}}
	if o.ring != "" {
		sharding.Lease.Duration, sharding.Lease.RenewDeadline, sharding.Lease.RetryPeriod = o.lease, o.lease*3/4, o.lease/8
	}
	mgr, err := framework.NewManager(cfg, framework.Options{
		Logger:   log,
		Cache:    informers.Options{Namespace: o.namespace},
		Sharding: sharding,
		// Reconciles are short; a member told to stop leaves at once.
		GracefulShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	m := &member{mgr: mgr, identity: o.identity, referee: strings.TrimSuffix(o.referee, "/"), prefix: o.prefix, work: o.work,
		http: &http.Client{Timeout: 30 * time.Second}}
	switch o.kind {
	case "configmaps":
		err = framework.NewBuilder[*corev1.ConfigMap](mgr, "member", framework.ControllerOptions{Workers: o.workers, Sharded: o.ring != ""}).
			Complete(reconcile.ObjectFunc[*corev1.ConfigMap](m.reconcile))
	case "secrets":
		err = framework.NewBuilder[*corev1.Secret](mgr, "member", framework.ControllerOptions{Workers: o.workers, Sharded: o.ring != ""}).
			Complete(reconcile.ObjectFunc[*corev1.Secret](func(context.Context, *corev1.Secret) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	default:
		err = fmt.Errorf("--kind=%q: want configmaps or secrets", o.kind)
	}
	if err != nil {
		return err
	}
	if o.ring != "" {
		go m.reportStatus(ctx, o.namespace)
	}
	return mgr.Start(ctx)
}

func (m *member) reconcile(ctx context.Context, cm *corev1.ConfigMap) (reconcile.Result, error) {
	if !strings.HasPrefix(cm.Name, m.prefix) {
		return reconcile.Result{}, nil
	}
	id := m.ids.Add(1)
	// The referee hears of every reconcile, even one whose context ends.
	rctx := context.WithoutCancel(ctx)
	m.post(rctx, "/enter", report.Enter{Member: m.identity, Process: os.Getpid(), ID: id, Key: cm.Name, At: time.Now().UnixNano()})
	exit := report.Exit{Member: m.identity, Process: os.Getpid(), ID: id, ReadRV: cm.ResourceVersion, Value: cm.Data["v"]}
	defer func() { m.post(rctx, "/exit", exit) }()

	if cm.Annotations[report.ObservedAnnotation] == exit.Value {
		exit.Outcome, exit.End = report.Unchanged, time.Now().UnixNano()
		return reconcile.Result{}, nil
	}
	if !m.worked(ctx) {
		exit.Outcome, exit.End = report.Cancelled, time.Now().UnixNano()
		return reconcile.Result{}, ctx.Err()
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{report.ObservedAnnotation: exit.Value}}})
	if err != nil {
		return reconcile.Result{}, err
	}
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
	err = m.mgr.Client().Patch(ctx, target, types.MergePatchType, patch)
	exit.End = time.Now().UnixNano()
	exit.Outcome, exit.WriteRV, exit.Err = outcome(ctx, err, target.ResourceVersion)
	return reconcile.Result{}, err
}

// worked waits --work, and reports whether ctx was still live then.
func (m *member) worked(ctx context.Context) bool {
	t := time.NewTimer(m.work)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// outcome is the outcome of a reconcile whose write returned err, with
// the resourceVersion rv it produced or the error's text.
func outcome(ctx context.Context, err error, rv string) (outcome, writeRV, text string) {
	switch {
	case err == nil:
		return report.Written, rv, ""
	case errors.Is(err, sharding.ErrBucketNotHeld), errors.Is(err, sharding.ErrClusterNotHeld), errors.Is(err, cluster.ErrDisengaged):
		return report.Fenced, "", err.Error()
	case apierrors.IsConflict(err):
		return report.Conflict, "", err.Error()
	case ctx.Err() != nil:
		return report.Cancelled, "", err.Error()
	default:
		return report.Error, "", err.Error()
	}
}

// reportStatus reports the ring status and the number of cached objects
// every 50 ms until ctx ends.
func (m *member) reportStatus(ctx context.Context, namespace string) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st, ok := m.mgr.RingStatus()
		if !ok {
			continue
		}
		s := report.Status{Member: m.identity, At: time.Now().UnixNano(), Serving: st.Serving, Syncing: st.Syncing, Draining: st.Draining,
			Members: st.Members, Refused: st.Refused}
		var list corev1.ConfigMapList
		if err := m.mgr.Client().List(ctx, &list, informers.InNamespace(namespace)); err == nil {
			for _, cm := range list.Items {
				if strings.HasPrefix(cm.Name, m.prefix) {
					s.Cached++
				}
			}
		}
		for _, is := range m.mgr.Cache().Stats() {
			if is.Kind.Kind == "ConfigMap" && is.ServerSharded {
				s.ServerSharded = true
			}
		}
		m.post(ctx, "/status", s)
	}
}

// post sends body to the referee; a referee that is gone (the suite ended)
// is ignored.
func (m *member) post(ctx context.Context, path string, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		panic("member: a referee call does not encode: " + err.Error())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.referee+path, bytes.NewReader(b))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.http.Do(req)
	if err != nil {
		return
	}
	_ = resp.Body.Close()
}
