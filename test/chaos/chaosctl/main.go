// Command chaosctl is the controller the chaos suite attacks: for each object
// of a custom kind it copies spec.value to status.value and records
// status.observedGeneration. It can panic or hang on a share of its
// reconciles, writes a trace of every reconcile for overlap checks, serves
// its cache contents for comparison with a fresh LIST, and checks itself for
// leaked goroutines after shutdown.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

type controller struct {
	client        *client.Client
	panicRate     float64
	hangRate      float64
	panics, hangs atomic.Int64
	trace         *tracer
}

func (c *controller) Reconcile(ctx context.Context, obj *unstructured.Unstructured) (reconcile.Result, error) {
	key := obj.GetNamespace() + "/" + obj.GetName()
	c.trace.record("B", key)
	defer c.trace.record("E", key)
	switch r := rand.Float64(); {
	case r < c.panicRate:
		c.panics.Add(1)
		panic("injected panic")
	case r < c.panicRate+c.hangRate:
		c.hangs.Add(1)
		<-ctx.Done() // hang until the reconcile timeout
		return reconcile.Result{}, ctx.Err()
	}
	want, _, _ := unstructured.NestedInt64(obj.Object, "spec", "value")
	have, _, _ := unstructured.NestedInt64(obj.Object, "status", "value")
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if have == want && observed == obj.GetGeneration() {
		return reconcile.Result{}, nil
	}
	patch := fmt.Sprintf(`{"status":{"value":%d,"observedGeneration":%d}}`, want, obj.GetGeneration())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	return reconcile.Result{}, c.client.Status().Patch(ctx, u, types.MergePatchType, []byte(patch))
}

// tracer appends "B|E key unixnano pid" lines to a file.
type tracer struct {
	mu sync.Mutex
	f  *os.File
}

func (t *tracer) record(ev, key string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	fmt.Fprintf(t.f, "%s %s %d %d\n", ev, key, time.Now().UnixNano(), os.Getpid())
	t.mu.Unlock()
}

func main() {
	var (
		flags       framework.Flags
		kind        = flag.String("kind", "chaos.converge.dev/v1/Widget", "group/version/Kind to reconcile")
		namespace   = flag.String("namespace", "", "namespace to watch; empty means all")
		tracePath   = flag.String("trace", "", "file to append reconcile begin/end lines to")
		debugAddr   = flag.String("debug-bind-address", "", "address serving /cache and /injected")
		panicRate   = flag.Float64("panic-rate", 0, "share of reconciles that panic")
		hangRate    = flag.Float64("hang-rate", 0, "share of reconciles that hang until their timeout")
		timeout     = flag.Duration("reconcile-timeout", 0, "per-reconcile timeout")
		syncTimeout = flag.Duration("sync-timeout", 0, "cache sync timeout; negative waits forever")
		workers     = flag.Int("workers", 4, "workers")
	)
	flags.Register(nil)
	flag.Parse()
	code := 0
	if err := run(&flags, *kind, *namespace, *tracePath, *debugAddr, *panicRate, *hangRate, *timeout, *syncTimeout, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "chaosctl:", err)
		code = 1
	}
	// After a clean shutdown nothing of the framework may still run. Ignored:
	// klog's flush daemon and the signal handler (process-wide by design), and
	// the readers of pooled HTTP/2 connections to the API server: client-go
	// shares one transport per configuration across the process, and its
	// idle connections close on their idle timeout, not with a client.
	// Anything else must end within leakGrace: a dial the shared transport
	// began for a request since cancelled outlives that request until it
	// completes or its TLS handshake times out (10 s against a blackholed
	// API server), and is not the framework's to stop.
	const leakGrace = 15 * time.Second
	ignore := []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("github.com/converge-dev/converge/framework.SignalContext.func1"),
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
	}
	deadline := time.Now().Add(leakGrace)
	err := goleak.Find(ignore...)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		err = goleak.Find(ignore...)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaosctl: LEAK (still running %v after shutdown): %v\n", leakGrace, err)
		code = 3
	} else {
		fmt.Fprintln(os.Stderr, "chaosctl: no goroutine leak")
	}
	os.Exit(code)
}

func run(flags *framework.Flags, kind, namespace, tracePath, debugAddr string, panicRate, hangRate float64, timeout, syncTimeout time.Duration, workers int) error {
	gv, k, ok := cutLast(kind)
	if !ok {
		return fmt.Errorf("--kind %q: want group/version/Kind", kind)
	}
	gvk, err := schema.ParseGroupVersion(gv)
	if err != nil {
		return err
	}
	opts, err := flags.Options()
	if err != nil {
		return err
	}
	opts.Cache.Namespace = namespace
	opts.Cache.SyncTimeout = syncTimeout
	cfg, err := flags.Config()
	if err != nil {
		return err
	}
	mgr, err := framework.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	c := &controller{client: mgr.Client(), panicRate: panicRate, hangRate: hangRate}
	if tracePath != "" {
		f, err := os.OpenFile(tracePath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		c.trace = &tracer{f: f}
	}
	sel := informers.Selection{Kind: gvk.WithKind(k)}
	ctrl, err := framework.NewBuilder[*unstructured.Unstructured](mgr, "chaos", framework.ControllerOptions{
		Workers: workers, Selection: sel, ReconcileTimeout: timeout,
	}).Build(c)
	if err != nil {
		return err
	}
	_ = ctrl
	ctx := framework.SignalContext(context.Background())
	if debugAddr != "" {
		inf, err := informers.ForObject[object.Object](mgr.Cache(), newKind(sel.Kind), sel)
		if err != nil {
			return err
		}
		srv := &http.Server{Addr: debugAddr, ReadHeaderTimeout: 5 * time.Second, Handler: debugMux(ctx, inf, c)}
		go func() { _ = srv.ListenAndServe() }()
		defer srv.Close()
	}
	return mgr.Start(ctx)
}

func newKind(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// debugMux serves /cache (name → resourceVersion of every cached object,
// plus the number of relists) and /injected (panics and hangs injected).
func debugMux(ctx context.Context, inf *informers.Informer[object.Object], c *controller) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/cache", func(w http.ResponseWriter, r *http.Request) {
		objs, err := inf.List(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := struct {
			Objects map[string]string `json:"objects"`
			Relists int64             `json:"relists"`
		}{Objects: map[string]string{}, Relists: inf.Relists()}
		for _, o := range objs {
			out.Objects[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/injected", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]int64{"panics": c.panics.Load(), "hangs": c.hangs.Load()})
	})
	return mux
}

func cutLast(s string) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}
