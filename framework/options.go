package framework

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/syncgc"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
)

// Options configures a Manager. The zero value is a valid configuration: all
// namespaces, no leader election, no servers, slog logging.
type Options struct {
	// Scheme maps Go types to kinds for the cache, the client, the event
	// recorders and the webhooks. Zero means Cache.Scheme, else a new scheme
	// holding client-go's built-in types; add your own API types to it
	// through Manager.Scheme before building controllers. Setting both to
	// different schemes is an error.
	Scheme *runtime.Scheme

	// Logger is the root logger; controllers add their name and each
	// reconcile adds the object and a reconcile ID. Zero means
	// NewLogger(LogOptions{}): text at verbosity 0 on standard error, with
	// client-go's klog output routed into it, made once per process and
	// shared by the managers built in it. logr.Discard() is the zero Logger
	// (see "Logging" in the package documentation).
	Logger logr.Logger

	// Cache configures the shared cache (namespace, per-kind selections,
	// resync, sync timeout, managedFields). Its Scheme, Mapper and
	// HTTPClient, when set, are the whole manager's: Scheme as Options.Scheme
	// (see there), Mapper as Manager.RESTMapper and the client's, and
	// HTTPClient for every request the manager makes to the API server (it
	// then carries the rest.Config's TLS and credentials, and its transport
	// decides compression: DisableCompression cannot be set with it). Zero
	// means all namespaces, no resync, a 2-minute sync timeout,
	// managedFields stripped, a discovery-backed mapper
	// (informers.NewRESTMapper) and an HTTP client built from the
	// rest.Config.
	Cache informers.Options

	// Clusters configures the clusters the manager talks to besides its
	// own: the providers that discover them, and how they are engaged
	// (see package cluster). Controllers watch them when their
	// ControllerOptions.Clusters says so. Its Cache, when zero, is
	// Options.Cache without its Mapper, HTTPClient and OnRequestError;
	// its Fence is asked after the manager's own (leadership, stop); its
	// Logger, when zero, is the manager's. Zero means the manager's own
	// cluster only.
	Clusters cluster.Options

	// LeaderElection makes the processes of one deployment elect a leader
	// that alone runs the controllers, while the others keep warm caches.
	// With Sharding.Clusters, members serve the clusters they hold, the
	// leader alone the own cluster; Enabled is part of the ring's layout,
	// and a member the ring refuses does not campaign. Zero means off:
	// every process runs every controller and reconciles the own cluster.
	LeaderElection LeaderElectionOptions

	// Sharding makes this process a member of a ring of processes that
	// share the objects of sharded controllers (ControllerOptions.Sharded):
	// each object is reconciled by exactly one live member, and each member
	// caches only its part. Leader-elected and sharded controllers can run
	// in one manager. Zero (no Ring) means no sharding.
	Sharding sharding.Options

	// HealthProbeBindAddress is where /healthz and /readyz are served (plain
	// HTTP, for kubelet probes), e.g. ":8081". /readyz waits for the caches
	// to sync, unless the manager serves a conversion webhook (see
	// AddConversion). Zero means not served.
	HealthProbeBindAddress string

	// Metrics configures the Prometheus endpoint. Zero means not served.
	Metrics MetricsOptions

	// Webhook configures the HTTPS server of the admission and conversion
	// webhooks (AddWebhook, AddConversion). The server runs only when at
	// least one webhook is registered. Zero means ":9443" with the
	// certificate from the conventional directory (see WebhookServerOptions).
	Webhook WebhookServerOptions

	// TracerProvider, when set, records an OpenTelemetry span per reconcile.
	// Zero means no tracing (and no tracing cost).
	TracerProvider trace.TracerProvider

	// DisableCompression asks the API server not to gzip its responses to
	// the manager's clients. Zero (false) does so only for a localhost or
	// loopback-IP Host (a tunnel through a local port too), and elsewhere
	// keeps the rest.Config's setting. Cache.HTTPClient's transport decides
	// for itself. The README (Performance, Tuning) says when it pays.
	DisableCompression bool

	// SyncHeapRatio bounds the heap while the caches first sync, then until
	// the controllers began a reconcile per cached object (or idle), for at
	// most a minute after the sync or as long as it took; and while a ring
	// member's reads of a bucket it claimed first sync, or, for two minutes
	// at most, its informers of a cluster it claimed. GOGC is lowered to
	// 100 × (SyncHeapRatio − 1): the heap stays under about that multiple of
	// the heap the sync ends with, for more collections. Then GOGC is
	// restored and the memory freed returned to the operating system. A
	// lower GOGC (or off) and a memory limit (GOMEMLIMIT) are left alone.
	// Zero means 1.4; negative means the GC settings are never touched;
	// any other value must be above 1 and at most 100.
	SyncHeapRatio float64

	// GracefulShutdownTimeout is how long in-flight reconciles may run after
	// Start's context is cancelled before their contexts are cancelled too.
	// It bounds Start: reconciles still running CancelGrace after their
	// contexts were cancelled are abandoned, and Start returns an error
	// wrapping ErrNotStopped that names them. Zero means 30 seconds; negative
	// means in-flight reconciles are cancelled at once.
	GracefulShutdownTimeout time.Duration
}

// LeaderElectionOptions configures leader election on a coordination.k8s.io
// Lease. Durations must satisfy Lease.Duration > Lease.RenewDeadline >
// 1.2 × Lease.RetryPeriod.
type LeaderElectionOptions struct {
	// Enabled turns leader election on. Zero (false) means off.
	Enabled bool

	// ID is the name of the Lease; processes with the same ID and namespace
	// compete for it. Required when Enabled.
	ID string

	// Lease times and places the Lease: Lease.Duration is how long
	// standbys wait before taking over from a leader that stopped
	// renewing; Lease.RenewDeadline how long the leader retries renewing
	// before it gives up leadership (and Start returns
	// ErrLeaderElectionLost); Lease.RetryPeriod the interval between
	// attempts to acquire or renew. Zero fields mean lease.Options'
	// defaults.
	Lease lease.Options
}

// MetricsOptions configures the metrics endpoint.
type MetricsOptions struct {
	// BindAddress is where /metrics is served, e.g. ":8443". Zero means not
	// served.
	BindAddress string

	// Insecure serves plain HTTP without authentication, for local
	// development. Zero (false) means HTTPS, with each request's bearer token
	// checked by a TokenReview and its identity authorized by a
	// SubjectAccessReview for "get" on the non-resource URL /metrics.
	Insecure bool

	// CertDir holds the HTTPS certificate and key (for example a
	// cert-manager Secret mounted as a volume). The files are read at Start
	// (a missing or invalid pair fails Start) and read again whenever they
	// change, so a rotated certificate is served without a restart. Zero
	// means a self-signed certificate generated at start (scrapers then
	// skip verification, as Prometheus's kubernetes_sd does for pods).
	CertDir string

	// CertName is the certificate's file name in CertDir (PEM, leaf first,
	// then intermediates). Zero means "tls.crt".
	CertName string

	// KeyName is the private key's file name in CertDir (PEM). Zero means
	// "tls.key".
	KeyName string

	// EnableHTTP2 serves HTTP/2 too. Zero (false) means HTTP/1.1 only, which
	// shuts the door on HTTP/2 Rapid Reset (CVE-2023-44487) style attacks.
	EnableHTTP2 bool

	// DisableDebug turns off the debug endpoint (package
	// framework/introspect), served next to /metrics at introspect.Path
	// (/debug/converge/): a page and a JSON API showing each controller's
	// queue by priority, in-flight keys, rates and errors, the informers'
	// sync state, leadership, webhooks and, per object, where it
	// stands and its last reconciles (see converge explain). It shows names,
	// namespaces, states and error texts, never an object's contents. It is
	// guarded as /metrics is: with HTTPS, a TokenReview and a
	// SubjectAccessReview for "get" on the request's path (grant
	// nonResourceURLs "/debug/converge/*" to those who may debug, apart from
	// the scrapers' "/metrics"); with Insecure, it is served only to
	// loopback clients (kubectl port-forward) on a loopback host name.
	// Zero (false) means served.
	DisableDebug bool

	// PprofBindAddress serves net/http/pprof there (plain HTTP, bind it to
	// localhost). Zero means pprof is not served.
	PprofBindAddress string
}

// WebhookServerOptions configures the webhook server. It always serves
// HTTPS: the API server calls webhooks over TLS only.
type WebhookServerOptions struct {
	// Addr is where the webhooks are served, e.g. ":9443" or
	// "127.0.0.1:0". Zero means ":9443".
	Addr string

	// CertDir holds the serving certificate and key (for example a
	// cert-manager Secret mounted as a volume). The files are read at Start
	// (a missing or invalid pair fails Start) and read again whenever they
	// change, so a rotated certificate is served without a restart. Zero
	// means filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs").
	CertDir string

	// CertName is the certificate's file name in CertDir (PEM, leaf first,
	// then intermediates). Zero means "tls.crt".
	CertName string

	// KeyName is the private key's file name in CertDir (PEM). Zero means
	// "tls.key".
	KeyName string

	// EnableHTTP2 serves HTTP/2 too. Zero (false) means HTTP/1.1 only,
	// which shuts the door on HTTP/2 Rapid Reset (CVE-2023-44487) style
	// attacks; kube-apiserver calls webhooks over HTTP/1.1 or HTTP/2 alike.
	EnableHTTP2 bool

	// MaxRequestBytes bounds a review's body; a larger one is refused with
	// 413. Raise it when conversions of large lists are refused. Zero means
	// webhook.DefaultMaxRequestBytes (7 MiB) for admission reviews and
	// webhook.DefaultMaxConversionRequestBytes (64 MiB) for conversion
	// reviews, which carry whole lists.
	MaxRequestBytes int64

	// ReadTimeout bounds reading a whole request, headers and body. Zero
	// means 30 s, the longest timeoutSeconds a webhook configuration allows.
	ReadTimeout time.Duration

	// WriteTimeout bounds handling a request and writing its response.
	// Zero means 30 s, the longest the API server waits for a webhook.
	WriteTimeout time.Duration

	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request. Zero means 120 s: longer than the 90 s kube-apiserver
	// keeps an idle connection to a webhook, so the API server always
	// drops it first (a connection the server closes just as the API
	// server reuses it fails that call).
	IdleTimeout time.Duration
}

const (
	defaultGracefulShutdownTimeout = 30 * time.Second
	defaultLeaseDuration           = 15 * time.Second
	defaultRenewDeadline           = 10 * time.Second
	defaultRetryPeriod             = 2 * time.Second
	defaultShardBuckets            = 32
	defaultHandoverTimeout         = 10 * time.Second
	defaultMaxClockSkew            = time.Second
	inClusterNamespaceFile         = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// defaultLogger is NewLogger(LogOptions{}), made (and routed into klog) once
// per process: klog's logger must not be replaced while other goroutines log
// through it.
var defaultLogger = sync.OnceValue(func() logr.Logger {
	// NewLogger fails only on a bad format or a negative verbosity.
	log, _ := NewLogger(LogOptions{})
	return log
})

func (o Options) withDefaults() Options {
	if o.Scheme == nil {
		o.Scheme = o.Cache.Scheme
	}
	if o.Scheme == nil {
		o.Scheme = runtime.NewScheme()
		// AddToScheme only fails on conflicting registrations, impossible on a new scheme.
		_ = clientgoscheme.AddToScheme(o.Scheme)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = defaultLogger()
	}
	o.Webhook = o.Webhook.withDefaults()
	if o.Metrics.CertName == "" {
		o.Metrics.CertName = "tls.crt"
	}
	if o.Metrics.KeyName == "" {
		o.Metrics.KeyName = "tls.key"
	}
	if o.SyncHeapRatio == 0 {
		o.SyncHeapRatio = syncgc.DefaultRatio
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = defaultGracefulShutdownTimeout
	}
	le := &o.LeaderElection
	le.Lease = leaseDefaults(le.Lease, le.Enabled)
	if sh := &o.Sharding; sh.Ring != "" {
		sh.Lease = leaseDefaults(sh.Lease, true)
		if sh.Buckets.By == "" {
			sh.Buckets.By = sharding.ByUID
		}
		if sh.Buckets.Count == 0 {
			sh.Buckets.Count = defaultShardBuckets
		}
		if sh.HandoverTimeout == 0 {
			sh.HandoverTimeout = defaultHandoverTimeout
		}
		if sh.FormationDelay == 0 {
			sh.FormationDelay = sh.Lease.RetryPeriod
		}
		if sh.MaxClockSkew == 0 {
			sh.MaxClockSkew = defaultMaxClockSkew
		}
	}
	return o
}

// leaseDefaults fills in the zero fields of o, the Lease options of leader
// election and of the sharding ring alike; named fills in its namespace
// and identity too (a Lease that is used).
func leaseDefaults(o lease.Options, named bool) lease.Options {
	if o.Duration == 0 {
		o.Duration = defaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = defaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = defaultRetryPeriod
	}
	if named && o.Namespace == "" {
		o.Namespace = podNamespace()
	}
	if named && o.Identity == "" {
		o.Identity = defaultIdentity()
	}
	return o
}

// podNamespace is the namespace of the pod's service account when running
// in a cluster, "default" otherwise.
func podNamespace() string {
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "default"
}

// defaultIdentity is the hostname plus a random suffix.
func defaultIdentity() string {
	host, _ := os.Hostname()
	return host + "_" + randomSuffix()
}

// validate checks o after withDefaults; each error names the field and rule.
func (o Options) validate() error {
	var errs []error
	if le := o.LeaderElection.Lease; o.LeaderElection.Enabled {
		if o.LeaderElection.ID == "" {
			errs = append(errs, errors.New("Options.LeaderElection.ID is required when leader election is enabled"))
		}
		if le.Duration <= le.RenewDeadline {
			errs = append(errs, fmt.Errorf("Options.LeaderElection.Lease.Duration (%v) must be greater than RenewDeadline (%v)", le.Duration, le.RenewDeadline))
		}
		if float64(le.RenewDeadline) <= 1.2*float64(le.RetryPeriod) {
			errs = append(errs, fmt.Errorf("Options.LeaderElection.Lease.RenewDeadline (%v) must be greater than 1.2 × RetryPeriod (%v)", le.RenewDeadline, le.RetryPeriod))
		}
		if le.RetryPeriod <= 0 {
			errs = append(errs, fmt.Errorf("Options.LeaderElection.Lease.RetryPeriod must be positive, got %v", le.RetryPeriod))
		}
	}
	if sh := o.Sharding; sh.Ring != "" {
		errs = append(errs, validateSharding(sh)...)
	} else if sh.Clusters {
		errs = append(errs, errors.New("Options.Sharding.Clusters needs Options.Sharding.Ring: clusters are spread over the members of a ring"))
	}
	if r := o.SyncHeapRatio; !(r < 0) && !(r > 1 && r <= 100) {
		errs = append(errs, fmt.Errorf("Options.SyncHeapRatio must be negative (the GC left alone), zero (1.4), or above 1 and at most 100, got %v", r))
	}
	if o.Metrics.CertDir == "" && (o.Metrics.CertName != "tls.crt" || o.Metrics.KeyName != "tls.key") {
		errs = append(errs, fmt.Errorf("Options.Metrics.CertName %q and KeyName %q name files in CertDir, which is empty: set CertDir too", o.Metrics.CertName, o.Metrics.KeyName))
	}
	if o.Metrics.BindAddress != "" && o.Metrics.BindAddress == o.HealthProbeBindAddress && !anyPort(o.HealthProbeBindAddress) {
		errs = append(errs, fmt.Errorf("Options.Metrics.BindAddress and Options.HealthProbeBindAddress are both %q", o.HealthProbeBindAddress))
	}
	if o.Cache.Scheme != nil && o.Cache.Scheme != o.Scheme {
		errs = append(errs, errors.New("Options.Scheme and Options.Cache.Scheme are different schemes: set one, which the cache, the client and the webhooks share"))
	}
	if o.Cache.HTTPClient != nil && o.DisableCompression {
		errs = append(errs, errors.New("Options.DisableCompression sets the transport the manager builds, and Options.Cache.HTTPClient brings its own: set compression in that client's transport instead"))
	}
	errs = append(errs, o.Webhook.validate()...)
	if len(errs) > 0 {
		return fmt.Errorf("framework: invalid manager options: %w", errors.Join(errs...))
	}
	return nil
}

// anyPort reports whether addr asks for a port the kernel picks (":0",
// "127.0.0.1:0"): two such listeners never collide.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// validate checks o after withDefaults.
func validateSharding(o sharding.Options) []error {
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Ring); len(msgs) > 0 || len(o.Ring) > maxRingName {
		errs = append(errs, fmt.Errorf("Options.Sharding.Ring %q must be a DNS label of at most %d characters", o.Ring, maxRingName))
	}
	if err := o.Buckets.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Options.Sharding: %w", err))
	}
	if o.Lease.Duration <= o.Lease.RenewDeadline {
		errs = append(errs, fmt.Errorf("Options.Sharding.Lease.Duration (%v) must be greater than RenewDeadline (%v)", o.Lease.Duration, o.Lease.RenewDeadline))
	}
	if o.Lease.RetryPeriod <= 0 || o.Lease.RenewDeadline <= o.Lease.RetryPeriod {
		errs = append(errs, fmt.Errorf("Options.Sharding.Lease.RetryPeriod (%v) must be positive and shorter than RenewDeadline (%v)", o.Lease.RetryPeriod, o.Lease.RenewDeadline))
	}
	if o.HandoverTimeout < 0 {
		errs = append(errs, fmt.Errorf("Options.Sharding.HandoverTimeout must not be negative, got %v", o.HandoverTimeout))
	}
	return errs
}

// maxRingName bounds Options.Sharding.Ring, which prefixes Lease names.
const maxRingName = 40
