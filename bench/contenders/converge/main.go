// Command converge is the benchmark's converge contender: one controller for
// the workload's kind, built the way the README shows, with the manager's
// defaults. For the parents workload it is a declarative controller (see
// apps.go). With --ring it is a member of that sharding ring and its
// controller is sharded; it then answers the driver's "status" with its
// identity and the buckets it serves. With --kind=fleet it is the fleet
// workload's manager of many clusters (fleet.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/bench/internal/report"
	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
	"github.com/converge-dev/converge/sharding"
)

func main() {
	kind := flag.String("kind", "configmaps", "workload: configmaps, pods, widgets, parents or fleet")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	workers := flag.Int("workers", 4, "concurrent reconciles")
	ring := flag.String("ring", "", "join this sharding ring and shard the controller (Options.Sharding.Ring); empty: no ring")
	ringNamespace := flag.String("ring-namespace", "", "namespace of the ring's Leases (Options.Sharding.Namespace)")
	identity := flag.String("identity", "", "this member's identity in the ring (Options.Sharding.Identity)")
	compact := flag.Bool("compact", false, "store the workload's kind compact (informers.Options.Compact, defaults)")
	flag.Parse()
	if workload.Kind(*kind) == workload.Fleet {
		runFleetMain(*kubeconfig, *workers)
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := framework.LoadConfig(*kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	// All defaults, but for the documented experiments (bench/README.md)
	// and the ring of the sharded workload.
	var cacheOpts informers.Options
	if *compact {
		cacheOpts.Compact = map[schema.GroupKind]informers.CompactOptions{compactKinds[workload.Kind(*kind)]: {}}
	}
	if os.Getenv("BENCH_COMPRESSION") != "" {
		// A transport of our own keeps gzip on even for a loopback server.
		if cacheOpts.HTTPClient, err = rest.HTTPClientFor(cfg); err != nil {
			log.Fatal(err)
		}
	}
	mgr, err := framework.NewManager(cfg, framework.Options{
		Cache:              cacheOpts,
		DisableCompression: os.Getenv("BENCH_DISABLE_COMPRESSION") != "",
		SyncHeapRatio:      envFloat("BENCH_SYNC_HEAP_RATIO"),
		Sharding:           sharding.Options{Ring: *ring, Lease: lease.Options{Namespace: *ringNamespace, Identity: *identity}},
	})
	if err != nil {
		log.Fatal(err)
	}
	report.SetStatus(func() string { return ringStatus(mgr) + " " + cacheStatus(mgr) })
	setReads(mgr, workload.Kind(*kind))
	report.Start()
	opts := framework.ControllerOptions{Workers: *workers, Sharded: *ring != ""}
	switch workload.Kind(*kind) {
	case workload.ConfigMaps:
		err = run(mgr, opts, workload.ConfigMapGen)
	case workload.Pods:
		err = run(mgr, opts, workload.PodGen)
	case workload.Widgets:
		if err = workload.AddToScheme(mgr.Scheme()); err == nil {
			err = run(mgr, opts, workload.WidgetGen)
		}
	case workload.Parents:
		if err = workload.AddToScheme(mgr.Scheme()); err == nil {
			err = runApps(mgr, opts)
		}
	default:
		log.Fatalf("unknown kind %q", *kind)
	}
	if err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Fatal(err)
	}
	report.Stop()
}

// runFleetMain runs the fleet workload's manager (see fleet.go) until
// SIGTERM.
func runFleetMain(kubeconfig string, workers int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := framework.LoadConfig(kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := newFleetManager(cfg)
	if err != nil {
		log.Fatal(err)
	}
	f, err := runFleet(mgr, framework.ControllerOptions{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	report.SetStatus(func() string { return f.status(mgr) })
	report.Start()
	if err := mgr.Start(ctx); err != nil {
		log.Fatal(err)
	}
	report.Stop()
}

// envFloat is the number in the environment variable name, zero when it is
// unset or not a number.
func envFloat(name string) float64 {
	f, _ := strconv.ParseFloat(os.Getenv(name), 64)
	return f
}

// ringStatus is the answer to the driver's "status": this member's identity
// and how many buckets it serves, syncs and drains, and how many members it
// sees; "ring=none" without a ring.
func ringStatus(mgr *framework.Manager) string {
	st, ok := mgr.RingStatus()
	if !ok {
		return "ring=none"
	}
	return fmt.Sprintf("ring=%s identity=%s buckets=%d serving=%d syncing=%d draining=%d members=%d",
		st.Ring, st.Identity, st.Buckets.Count, len(st.Serving), len(st.Syncing), len(st.Draining), len(st.Members))
}

// cacheStatus is the cache's own estimate of its heap bytes: every
// informer's, and the values its objects share.
func cacheStatus(mgr *framework.Manager) string {
	total := mgr.Cache().SharedBytes()
	for _, st := range mgr.Cache().Stats() {
		total += st.Bytes
	}
	return fmt.Sprintf("cacheBytes=%d", total)
}

// run registers the controller: each reconcile is handed the object from the
// cache and reports what it saw.
// compactKinds is the kind --compact stores compact, per workload.
var compactKinds = map[workload.Kind]schema.GroupKind{
	workload.ConfigMaps: {Kind: "ConfigMap"},
	workload.Pods:       {Kind: "Pod"},
	workload.Widgets:    {Group: "bench.converge.dev", Kind: "Widget"},
	workload.Parents:    {Group: "apps", Kind: "Deployment"},
}

func run[T object.Object](mgr *framework.Manager, opts framework.ControllerOptions, gen func(T) string) error {
	return framework.NewBuilder[T](mgr, "bench", opts).
		Complete(reconcile.ObjectFunc[T](func(_ context.Context, obj T) (reconcile.Result, error) {
			report.Seen(obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion(), gen(obj))
			return reconcile.Result{}, nil
		}))
}
