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

	"github.com/converge-dev/converge/informers"
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

	// LeaderElection makes the processes of one deployment elect a leader
	// that alone runs the controllers, while the others keep warm caches.
	// Zero means off: every process runs every controller.
	LeaderElection LeaderElectionOptions

	// Sharding makes this process a member of a ring of processes that
	// share the objects of sharded controllers (ControllerOptions.Sharded):
	// each object is reconciled by exactly one live member, and each member
	// caches only its part. Leader-elected and sharded controllers can run
	// in one manager. Zero (no Ring) means no sharding.
	Sharding ShardingOptions

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
	// the manager's clients. Zero (false) leaves the rest.Config's setting
	// as it is (compressed, unless the config says otherwise). It sets the
	// transport the manager builds, so it cannot be set with
	// Cache.HTTPClient. See the package doc (# Tuning) for when it pays.
	DisableCompression bool

	// SyncGCPercent is the garbage collector's GOGC while the caches first
	// sync, and while a sharding ring member's reads of a bucket it
	// claimed first sync. Once they have synced, the previous GOGC is
	// restored and the memory the sync freed is returned to the operating
	// system. A
	// larger GOGC (or GOGC=off) is left alone, and a memory limit
	// (GOMEMLIMIT) still bounds the heap. See the package doc (# Tuning).
	// Zero means 400; negative means the GC settings are never touched.
	SyncGCPercent int

	// GracefulShutdownTimeout is how long in-flight reconciles may run after
	// Start's context is cancelled before their contexts are cancelled too.
	// It bounds Start: reconciles still running CancelGrace after their
	// contexts were cancelled are abandoned, and Start returns an error
	// wrapping ErrNotStopped that names them. Zero means 30 seconds; negative
	// means in-flight reconciles are cancelled at once.
	GracefulShutdownTimeout time.Duration
}

// LeaderElectionOptions configures leader election on a coordination.k8s.io
// Lease. Durations must satisfy LeaseDuration > RenewDeadline > 1.2 × RetryPeriod.
type LeaderElectionOptions struct {
	// Enabled turns leader election on. Zero (false) means off.
	Enabled bool

	// ID is the name of the Lease; processes with the same ID and namespace
	// compete for it. Required when Enabled.
	ID string

	// Namespace holds the Lease. Zero means the namespace of the pod's service
	// account when running in a cluster, "default" otherwise.
	Namespace string

	// Identity names this process in the Lease. Zero means the hostname plus
	// a random suffix.
	Identity string

	// LeaseDuration is how long a lease is valid: how long standbys wait
	// before taking over from a leader that stopped renewing. Zero means 15 s.
	LeaseDuration time.Duration

	// RenewDeadline is how long the leader retries renewing before it gives
	// up leadership (and Start returns ErrLeaderElectionLost). Zero means 10 s.
	RenewDeadline time.Duration

	// RetryPeriod is the interval between attempts to acquire or renew.
	// Zero means 2 s.
	RetryPeriod time.Duration
}

// ShardingOptions configures this process's membership of a sharding ring.
//
// The hash space of the shard key (KEP-5866's FNV-1a 64 of each object's UID
// or namespace) is cut into BucketCount equal ranges. Each member holds a member
// Lease; each bucket has a Lease naming the member that holds it, claimed
// with a compare-and-swap on its resourceVersion and renewed by its holder
// every RetryPeriod. The buckets are assigned by rendezvous hashing over the
// live members, at most ceil(BucketCount/members) each, so every member computes
// the same assignment. A member gives a bucket up when the assignment moves
// it: it stops dispatching the bucket's keys, waits for their in-flight
// reconciles (at most HandoverTimeout), then releases the Lease; the new
// holder claims it, lists the bucket's objects and only then dispatches its
// keys. A bucket whose Lease was not renewed for LeaseDuration (its holder
// crashed or was cut off) is claimed by its new owner after that.
//
// Changes cross a handover at change priority. The holder of a bucket
// writes on the bucket's Lease, for each sharded controller, a mark: the
// lowest resourceVersion an object of the bucket may have and still carry
// a change of the primary kind it did not reconcile (its queue still owed
// the key a change or a retry, or the event had not reached it). It writes
// the mark with every renewal of the Lease, and a last one when it gives
// the bucket up (on a rebalance, or when it stops). The next holder queues
// the objects of its initial list at or above the mark as changes and the
// others as replays, behind real changes. After a crash, the mark is the
// one of the last renewal, at most RetryPeriod older than the crash, so the
// changes since count as changes too. One owed key whose object is old (a
// retry, or a parent queued for a child's change) lowers the mark, and
// more objects then count as changes. A holder that cannot say (its
// informer listed again since it synced; resourceVersions are not decimal
// integers, as etcd's are) leaves the mark the Lease carries, which is
// older and so counts more objects as changes, or none: then every object
// is a replay. Changes of owned or watched kinds in flight at the handover
// are not marked: the keys they map to are replayed.
//
// Writes are fenced per bucket: the client refuses a sharded reconcile's
// writes (ErrBucketNotHeld) once its bucket was given up, lost, or not
// renewed within RenewDeadline of the start of its last successful renewal.
// Another member can claim it only LeaseDuration after it last saw that
// renewal. A write that left the process before the fence closed but
// reaches the API server later (a process frozen between the check and the
// send, a partition that heals) is stopped by the server: every write of a
// sharded reconcile is conditional on the object as the reconcile read it
// (client.WithPreconditions): its resourceVersion, and its UID for a
// deletion. Once the next holder (or anyone) changed the object, the late
// write fails with a Conflict, and the key is reconciled by whoever holds
// its bucket now. The window that remains is the writes with no version to
// name: a Create, a server-side apply of an object the reconcile never
// read, and DeleteAllOf. A create is refused only when the object exists
// (AlreadyExists; a declarative child's first apply, alike), so a create
// delayed past the next holder's deletion of that object makes it again.
//
// Members share buckets only with members of the same layout: BucketCount,
// Key, and the sharded controllers (their names and kinds). The ring's
// layout Lease (named after the ring, "-layout") records the layout that
// holds the ring; each member of it renews the Lease every RetryPeriod
// with a patch that first tests the layout, and a bucket's writes are
// fenced unless its holder renewed both the bucket's Lease and the layout
// Lease within RenewDeadline. A member of another layout is refused,
// whatever the timing: it claims no bucket, is not ready (its readiness
// and RingStatus.Refused name both members and both layouts), the metric
// converge_shard_refusals_total counts it, and it keeps trying: it takes
// the ring over once no member of the layout the Lease records renewed it
// for LeaseDuration, or for RenewDeadline after the last of them released
// it on leaving. To change a ring's layout, stop its members before the
// new ones start (a Deployment's Recreate strategy), or let the new ones
// wait, unready, until the old ones are gone; the README says more.
type ShardingOptions struct {
	// Ring names the ring; processes with the same Ring and Namespace share
	// its buckets. It prefixes the Leases' names, so it must be a DNS label
	// of at most 40 characters. Zero means no sharding.
	Ring string

	// Namespace holds the ring's Leases. Zero means the namespace of the
	// pod's service account when running in a cluster, "default" otherwise.
	Namespace string

	// Identity names this member in the Leases. Zero means the hostname
	// plus a random suffix.
	Identity string

	// Key is the field whose hash places an object in a bucket:
	// informers.ShardByUID or informers.ShardByNamespace. By namespace, all
	// the objects of a namespace go to one member, a parent and its
	// children alike: a sharded controller then reads the namespaced kinds
	// it owns per held bucket as well (ControllerOptions.Sharded). By UID,
	// only the primary kind is read per bucket, and the kinds a sharded
	// controller owns or watches are cached whole in every member. By
	// namespace, the objects of a cluster-scoped primary kind all fall into
	// one bucket, so one member reconciles them all. Zero means
	// informers.ShardByUID. Every member of a ring must use the same Key
	// and BucketCount: a member of a ring whose live members say otherwise
	// is refused (see ShardingOptions).
	Key informers.ShardKey

	// BucketCount is how many buckets the hash space is cut into: the
	// unit of handover, and the most members that get work; at most 4096.
	// Zero means 32.
	BucketCount int

	// LeaseDuration is how long a bucket's Lease stays valid after its
	// holder's last renewal: how long a crashed member's buckets wait. Zero
	// means 15 s.
	LeaseDuration time.Duration

	// RenewDeadline is how long after the start of its last successful
	// renewal a member still writes for a bucket. It must be shorter than
	// LeaseDuration. Zero means 10 s.
	RenewDeadline time.Duration

	// RetryPeriod is the interval between renewals, and between looks at
	// the ring when no Lease changes. It must be shorter than
	// RenewDeadline. Zero means 2 s.
	RetryPeriod time.Duration

	// FormationDelay is how long a member waits, from joining the ring
	// (once its caches of the ring's Leases synced), before it claims
	// buckets while the ring is forming: while no other live member holds
	// a bucket Lease renewed within LeaseDuration (the ring's first start,
	// or a start after every member left). The members that join within
	// FormationDelay of the first then each claim their own share once,
	// as the assignment over all of them gives it, instead of the first
	// one claiming and listing every bucket and handing most of them over
	// as the others appear; replicas that start further apart (slow image
	// pulls) want a longer delay. A member joining a ring in which another
	// live member holds a bucket claims at once. A ring of one replica
	// replaced by a new one (a Recreate rollout) waits the delay each
	// time, unserved: set it negative there. Zero means RetryPeriod; a
	// negative value means no wait.
	FormationDelay time.Duration

	// MaxClockSkew is the most the wall clocks of the ring's members may
	// differ by. A member judges a Lease it has not yet seen change by the
	// renewal time the Lease carries, written by its holder's clock: one
	// renewed more than LeaseDuration + MaxClockSkew ago has expired, so
	// a member started after a crash serves the crashed member's buckets
	// at once rather than after watching its Leases for LeaseDuration. A
	// Lease seen to change is judged by this member's clock alone: it
	// expires LeaseDuration after the last change seen. Safety needs the
	// clocks within MaxClockSkew + LeaseDuration − RenewDeadline of each
	// other; a member that sees a renewal arrive later than that after
	// the time it carries stops judging by carried times and logs it.
	// Zero means 1 s; a negative value means never judge by carried times
	// (a member started after a crash waits LeaseDuration, as client-go's
	// leader election does).
	MaxClockSkew time.Duration

	// HandoverTimeout bounds how long a member giving a bucket up waits for
	// the bucket's in-flight reconciles; those still running then have
	// their contexts cancelled and are named in the log, and their writes
	// are refused. It must not be negative. Zero means 10 s.
	HandoverTimeout time.Duration
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

	// DisableDebug turns off the debug endpoint, served next to /metrics
	// at DebugPath (/debug/converge/): a page and a JSON API showing each
	// controller's queue by priority, in-flight keys, rates and errors, the
	// informers' sync state, leadership, webhooks and, per object, where it
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
	if o.SyncGCPercent == 0 {
		o.SyncGCPercent = defaultSyncGCPercent
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = defaultGracefulShutdownTimeout
	}
	le := &o.LeaderElection
	if le.LeaseDuration == 0 {
		le.LeaseDuration = defaultLeaseDuration
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = defaultRenewDeadline
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = defaultRetryPeriod
	}
	if le.Enabled && le.Namespace == "" {
		le.Namespace = podNamespace()
	}
	if le.Enabled && le.Identity == "" {
		le.Identity = defaultIdentity()
	}
	if sh := &o.Sharding; sh.Ring != "" {
		if sh.Namespace == "" {
			sh.Namespace = podNamespace()
		}
		if sh.Identity == "" {
			sh.Identity = defaultIdentity()
		}
		if sh.Key == "" {
			sh.Key = informers.ShardByUID
		}
		if sh.BucketCount == 0 {
			sh.BucketCount = defaultShardBuckets
		}
		if sh.LeaseDuration == 0 {
			sh.LeaseDuration = defaultLeaseDuration
		}
		if sh.RenewDeadline == 0 {
			sh.RenewDeadline = defaultRenewDeadline
		}
		if sh.RetryPeriod == 0 {
			sh.RetryPeriod = defaultRetryPeriod
		}
		if sh.HandoverTimeout == 0 {
			sh.HandoverTimeout = defaultHandoverTimeout
		}
		if sh.FormationDelay == 0 {
			sh.FormationDelay = sh.RetryPeriod
		}
		if sh.MaxClockSkew == 0 {
			sh.MaxClockSkew = defaultMaxClockSkew
		}
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
	le := o.LeaderElection
	if le.Enabled {
		if le.ID == "" {
			errs = append(errs, errors.New("Options.LeaderElection.ID is required when leader election is enabled"))
		}
		if le.LeaseDuration <= le.RenewDeadline {
			errs = append(errs, fmt.Errorf("Options.LeaderElection.LeaseDuration (%v) must be greater than RenewDeadline (%v)", le.LeaseDuration, le.RenewDeadline))
		}
		if float64(le.RenewDeadline) <= 1.2*float64(le.RetryPeriod) {
			errs = append(errs, fmt.Errorf("Options.LeaderElection.RenewDeadline (%v) must be greater than 1.2 × RetryPeriod (%v)", le.RenewDeadline, le.RetryPeriod))
		}
		if le.RetryPeriod <= 0 {
			errs = append(errs, fmt.Errorf("Options.LeaderElection.RetryPeriod must be positive, got %v", le.RetryPeriod))
		}
	}
	if sh := o.Sharding; sh.Ring != "" {
		errs = append(errs, sh.validate()...)
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
func (o ShardingOptions) validate() []error {
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Ring); len(msgs) > 0 || len(o.Ring) > maxRingName {
		errs = append(errs, fmt.Errorf("Options.Sharding.Ring %q must be a DNS label of at most %d characters", o.Ring, maxRingName))
	}
	if err := (informers.Buckets{Key: o.Key, Count: o.BucketCount}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Options.Sharding: %w", err))
	}
	if o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("Options.Sharding.LeaseDuration (%v) must be greater than RenewDeadline (%v)", o.LeaseDuration, o.RenewDeadline))
	}
	if o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod {
		errs = append(errs, fmt.Errorf("Options.Sharding.RetryPeriod (%v) must be positive and shorter than RenewDeadline (%v)", o.RetryPeriod, o.RenewDeadline))
	}
	if o.HandoverTimeout < 0 {
		errs = append(errs, fmt.Errorf("Options.Sharding.HandoverTimeout must not be negative, got %v", o.HandoverTimeout))
	}
	return errs
}

// maxRingName bounds Options.Sharding.Ring, which prefixes Lease names.
const maxRingName = 40
