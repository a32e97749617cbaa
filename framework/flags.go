package framework

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/converge-dev/converge/internal/klogcap"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// Flags are the command-line flags most controller mains need, named as
// kubebuilder projects name them. Set fields before Register to change the
// defaults, then call Register, flag.Parse, and Options and Config.
type Flags struct {
	// Kubeconfig is --kubeconfig: the kubeconfig file. Empty means $KUBECONFIG,
	// ~/.kube/config, then in-cluster credentials.
	Kubeconfig string
	// LeaderElect is --leader-elect.
	LeaderElect bool
	// LeaderElectionNamespace is --leader-election-namespace.
	LeaderElectionNamespace string
	// LeaderElectionID is --leader-election-id: the Lease name. Set a default
	// (the program's name) before Register.
	LeaderElectionID string
	// MetricsBindAddress is --metrics-bind-address, e.g. ":8443"; "0" or
	// empty means metrics are not served.
	MetricsBindAddress string
	// MetricsInsecure is --metrics-insecure: plain HTTP without
	// authentication, for local development.
	MetricsInsecure bool
	// MetricsCertPath is --metrics-cert-path: the folder of the metrics
	// server's certificate. Empty means a self-signed certificate
	// (MetricsOptions.CertDir).
	MetricsCertPath string
	// MetricsCertName is --metrics-cert-name: the certificate's file name.
	// Empty means "tls.crt".
	MetricsCertName string
	// MetricsCertKey is --metrics-cert-key: the key's file name. Empty
	// means "tls.key".
	MetricsCertKey string
	// HealthProbeBindAddress is --health-probe-bind-address; "0" or empty
	// means probes are not served.
	HealthProbeBindAddress string
	// WebhookCertPath is --webhook-cert-path: the folder of the webhook
	// server's certificate. Empty means the manager's default
	// (WebhookServerOptions.CertDir).
	WebhookCertPath string
	// WebhookCertName is --webhook-cert-name: the certificate's file name.
	// Empty means "tls.crt".
	WebhookCertName string
	// WebhookCertKey is --webhook-cert-key: the key's file name. Empty means
	// "tls.key".
	WebhookCertKey string
	// EnableHTTP2 is --enable-http2: serve HTTP/2 on the metrics and webhook
	// servers too (off by default: HTTP/2 Rapid Reset).
	EnableHTTP2 bool
	// LogFormat is --log-format: "text" (the default) or "json".
	LogFormat string
	// Verbosity is -v: 0 logs info and errors, higher numbers more detail.
	// When the flag set already has a -v (klog.InitFlags registers one, as
	// ported client-go mains do), Register reuses it instead of registering a
	// second, and Options reads the level from it.
	Verbosity int
	// GracefulShutdownTimeout is --graceful-shutdown-timeout: how long
	// in-flight reconciles may run after SIGTERM. Zero means the manager's
	// default (30 s). Keep the pod's terminationGracePeriodSeconds longer.
	GracefulShutdownTimeout time.Duration
	// ShardRing is --shard-ring: the sharding ring (Options.Sharding.Ring)
	// whose replicas share the objects of the controllers that opt in
	// (ControllerOptions.Sharded). Empty means no sharding.
	ShardRing string
	// ShardKey is --shard-key: what places an object in a bucket of the
	// ring, "uid" or "namespace" (sharding.Options.Buckets.By; by namespace, the
	// objects a sharded controller owns go with their parents). It needs
	// --shard-ring. Empty means "uid".
	ShardKey string

	// sharedV is the -v flag another package registered first (klog's),
	// read by Options; nil when Register registered its own.
	sharedV *flag.Flag
}

// Register adds the flags to fs (flag.CommandLine when nil), with the
// fields' current values as defaults. A -v already on fs is reused (call
// klog.InitFlags before Register, not after: the flag package panics on a
// second -v).
func (f *Flags) Register(fs *flag.FlagSet) {
	if fs == nil {
		fs = flag.CommandLine
	}
	if f.LogFormat == "" {
		f.LogFormat = "text"
	}
	fs.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "path to a kubeconfig file; empty means $KUBECONFIG, ~/.kube/config, then in-cluster credentials")
	fs.BoolVar(&f.LeaderElect, "leader-elect", f.LeaderElect, "elect a leader among the replicas: only the leader runs controllers, the others keep warm caches")
	fs.StringVar(&f.LeaderElectionNamespace, "leader-election-namespace", f.LeaderElectionNamespace, "namespace of the leader election Lease; empty means the pod's namespace")
	fs.StringVar(&f.LeaderElectionID, "leader-election-id", f.LeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&f.MetricsBindAddress, "metrics-bind-address", f.MetricsBindAddress, `address of the Prometheus /metrics endpoint, e.g. ":8443"; "0" or empty disables it`)
	fs.BoolVar(&f.MetricsInsecure, "metrics-insecure", f.MetricsInsecure, "serve metrics over plain HTTP without authentication (local development only)")
	fs.StringVar(&f.MetricsCertPath, "metrics-cert-path", f.MetricsCertPath, "folder of the metrics server's certificate and key (e.g. a cert-manager Secret); empty means a self-signed certificate")
	fs.StringVar(&f.MetricsCertName, "metrics-cert-name", f.MetricsCertName, `file name of the metrics server's certificate; empty means "tls.crt"`)
	fs.StringVar(&f.MetricsCertKey, "metrics-cert-key", f.MetricsCertKey, `file name of the metrics server's key; empty means "tls.key"`)
	fs.StringVar(&f.HealthProbeBindAddress, "health-probe-bind-address", f.HealthProbeBindAddress, `address of /healthz and /readyz, e.g. ":8081"; "0" or empty disables them`)
	fs.StringVar(&f.WebhookCertPath, "webhook-cert-path", f.WebhookCertPath, "folder of the webhook server's certificate and key; empty means $TMPDIR/k8s-webhook-server/serving-certs")
	fs.StringVar(&f.WebhookCertName, "webhook-cert-name", f.WebhookCertName, `file name of the webhook server's certificate; empty means "tls.crt"`)
	fs.StringVar(&f.WebhookCertKey, "webhook-cert-key", f.WebhookCertKey, `file name of the webhook server's key; empty means "tls.key"`)
	fs.BoolVar(&f.EnableHTTP2, "enable-http2", f.EnableHTTP2, "serve HTTP/2 on the metrics and webhook servers too")
	fs.StringVar(&f.LogFormat, "log-format", f.LogFormat, `log format: "text" or "json"`)
	if v := fs.Lookup("v"); v != nil {
		f.sharedV = v
	} else {
		fs.IntVar(&f.Verbosity, "v", f.Verbosity, "log verbosity: 0 is info and errors, higher shows more detail")
	}
	fs.StringVar(&f.ShardRing, "shard-ring", f.ShardRing, "share the objects of sharded controllers among the replicas on this ring (Leases in the pod's namespace); empty means no sharding")
	fs.StringVar(&f.ShardKey, "shard-key", f.ShardKey, `with --shard-ring: "uid" spreads objects evenly, "namespace" keeps a namespace's objects (a parent and its children) on one replica; empty means "uid"`)
	fs.DurationVar(&f.GracefulShutdownTimeout, "graceful-shutdown-timeout", f.GracefulShutdownTimeout, "how long in-flight reconciles may run after SIGTERM; 0 means 30s, negative cancels them at once")
}

// Options returns manager Options set from the flags, with the logger they
// select (see NewLogger). Fields the flags do not cover keep their zero values.
func (f *Flags) Options() (Options, error) {
	if f.sharedV != nil {
		n, err := strconv.Atoi(f.sharedV.Value.String())
		if err != nil {
			return Options{}, fmt.Errorf("framework: flag -v=%q: want a whole number: %w", f.sharedV.Value.String(), err)
		}
		f.Verbosity = n
	}
	by, err := sharding.ParseField(f.ShardKey)
	if err != nil {
		return Options{}, fmt.Errorf(`framework: flag --shard-key=%q: want "uid" or "namespace"`, f.ShardKey)
	}
	if f.ShardKey != "" && f.ShardRing == "" {
		return Options{}, fmt.Errorf("framework: flag --shard-key=%s needs --shard-ring: without a ring nothing is sharded", f.ShardKey)
	}
	log, err := NewLogger(LogOptions{Format: f.LogFormat, Verbosity: f.Verbosity})
	if err != nil {
		return Options{}, err
	}
	return Options{
		Logger: log,
		LeaderElection: LeaderElectionOptions{
			Enabled: f.LeaderElect,
			ID:      f.LeaderElectionID,
			Lease:   lease.Options{Namespace: f.LeaderElectionNamespace},
		},
		HealthProbeBindAddress: disabledIfZero(f.HealthProbeBindAddress),
		Metrics: MetricsOptions{
			BindAddress: disabledIfZero(f.MetricsBindAddress),
			Insecure:    f.MetricsInsecure,
			CertDir:     f.MetricsCertPath,
			CertName:    f.MetricsCertName,
			KeyName:     f.MetricsCertKey,
			EnableHTTP2: f.EnableHTTP2,
		},
		Webhook: WebhookServerOptions{
			CertDir:     f.WebhookCertPath,
			CertName:    f.WebhookCertName,
			KeyName:     f.WebhookCertKey,
			EnableHTTP2: f.EnableHTTP2,
		},
		GracefulShutdownTimeout: f.GracefulShutdownTimeout,
		Sharding:                sharding.Options{Ring: f.ShardRing, Buckets: sharding.Buckets{By: by}},
	}, nil
}

// Config loads the API server configuration the flags point at (see LoadConfig).
func (f *Flags) Config() (*rest.Config, error) { return LoadConfig(f.Kubeconfig) }

func disabledIfZero(addr string) string {
	if addr == "0" {
		return ""
	}
	return addr
}

// LogOptions configures NewLogger. The zero value logs text at verbosity 0
// to standard error.
type LogOptions struct {
	// Format is "text" or "json". Zero means text.
	Format string
	// Verbosity: logr V(n) lines are written when n ≤ Verbosity. Zero means
	// info and errors only.
	Verbosity int
	// Writer receives the log. Zero means standard error.
	Writer io.Writer
}

// NewLogger returns a logr.Logger on log/slog, and routes client-go's klog
// output into it so one process writes one format. client-go gets the logger
// capped at V(7): its request and response dumps (V(8) and up), which can
// hold Secret data and bearer tokens, stay off whatever Verbosity is. Lines
// converge and your reconcilers write through a reconcile's context are
// capped the same way, since client-go logs through that context too.
func NewLogger(o LogOptions) (logr.Logger, error) {
	w := o.Writer
	if w == nil {
		w = os.Stderr
	}
	ho := &slog.HandlerOptions{Level: slog.Level(-o.Verbosity)}
	var h slog.Handler
	switch o.Format {
	case "", "text":
		h = slog.NewTextHandler(w, ho)
	case "json":
		h = slog.NewJSONHandler(w, ho)
	default:
		return logr.Logger{}, fmt.Errorf("framework: log format %q: want \"text\" or \"json\"", o.Format)
	}
	if o.Verbosity < 0 {
		return logr.Logger{}, fmt.Errorf("framework: log verbosity must not be negative, got %d", o.Verbosity)
	}
	log := logr.FromSlogHandler(h)
	klog.SetLoggerWithOptions(klogcap.Logger(log).WithName("client-go"), klog.ContextualLogger(true))
	return log, nil
}

// SignalContext returns a context that is cancelled on the first SIGINT or
// SIGTERM, starting a graceful shutdown; a second signal exits the process
// at once with status 1. Repeats within a second of the first are taken as
// one signal delivered twice (to the process and to its process group, as
// some supervisors do), not as a second request.
func SignalContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		first := time.Now()
		cancel()
		for range ch {
			if time.Since(first) < time.Second {
				continue
			}
			fmt.Fprintln(os.Stderr, "second signal: exiting at once")
			os.Exit(1)
		}
	}()
	return ctx
}
