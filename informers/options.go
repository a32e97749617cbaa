package informers

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/internal/restset"
)

// Options configures a Cache. The zero value is a valid configuration: every
// built-in type, all namespaces, no resync, managedFields stripped.
type Options struct {
	// Scheme maps Go types to kinds and decodes them.
	// Zero means client-go's scheme of built-in Kubernetes types.
	Scheme *runtime.Scheme

	// Mapper maps kinds to API resources.
	// Zero means a mapper backed by discovery on the cache's API server (NewRESTMapper).
	Mapper meta.RESTMapper

	// HTTPClient carries the cache's requests; sharing one with other
	// clients of the same API server shares their connections.
	// Zero means a client built from the rest.Config.
	HTTPClient *http.Client

	// Namespace limits every informer to one namespace unless its Selection
	// names another. Zero means all namespaces.
	Namespace string

	// ByKind gives the default Selection of a kind, used whenever a reader or
	// controller asks for that kind without a Selection of its own (for
	// example: only Pods with label app=web, only Secrets in one namespace).
	// Zero means every kind is cached in Namespace with no selectors.
	ByKind map[schema.GroupKind]Selection

	// ResyncPeriod replays every cached object to every listener at this
	// interval, as a safety net for controllers that act on the outside world.
	// Replayed keys are queued behind real changes. Zero means no resync.
	ResyncPeriod time.Duration

	// ResyncByKind overrides ResyncPeriod for the listeners of one kind's
	// informers, whatever their selection. A listener may still ask for its
	// own period (cache.HandlerOptions.ResyncPeriod in Informer.AddListener;
	// the framework's ControllerOptions.ResyncPeriod). Periods must be at
	// least one second, client-go's minimum. A kind absent, or zero, means
	// ResyncPeriod; negative means no resync for that kind.
	ResyncByKind map[schema.GroupKind]time.Duration

	// SyncTimeout bounds how long WaitForSync and a reader's first access to a
	// new kind wait for the initial list. Zero means 2 minutes; negative means
	// no bound other than the caller's context.
	SyncTimeout time.Duration

	// ReadYourWritesTimeout bounds how long Get and List wait for the cache
	// to reflect writes this process made (see Cache.ObserveWrite and
	// Reader).
	// Zero means 10 seconds; negative turns the wait off.
	ReadYourWritesTimeout time.Duration

	// KeepManagedFields keeps metadata.managedFields on cached objects. They are
	// rarely read by controllers and are often the largest part of an object's
	// metadata. Zero (false) means they are stripped before objects are stored.
	KeepManagedFields bool

	// DisableSharing stores every object exactly as decoded. Zero (false)
	// means equal labels, annotations, owner references and namespaces of
	// different objects (and, of Pods and Nodes, equal resource lists and
	// node selectors) are stored once and shared: cached objects are
	// read-only, and a cache of similar objects (the pods of a ReplicaSet)
	// then needs about a third less memory.
	DisableSharing bool

	// DisableCBOR reads typed custom resources (types without protobuf) as
	// JSON only. Zero (false) means lists and watches ask for CBOR first,
	// which API servers with the CBORServingAndStorage feature (KEP-4222)
	// serve and which decodes in half the time of JSON; other servers answer
	// JSON, as they would anyway.
	DisableCBOR bool

	// RefuseUnwatchedReads makes a Get or List of a kind no informer holds
	// fail with an error wrapping ErrNotWatched that names the kind, the
	// mode read (typed, unstructured or metadata) and the ways to fix it,
	// instead of starting an informer. A read is of a kind no informer
	// holds when no informer holds the kind in that mode with the kind's
	// default selection (Options.ByKind, else Namespace) and ByKind does
	// not name the kind: a kind named in ByKind is declared, and reads of
	// it in any mode may start its informer. This covers Cache.Get and
	// Cache.List (so a framework Manager's client) and KindReader; For and
	// ForObject start informers whatever this says. Zero (false) means
	// such a read starts an informer for the kind's default selection,
	// waits for its initial list (up to SyncTimeout) and keeps it for the
	// life of the cache, as a watched kind's: memory then grows with every
	// object of the kind in that selection, often the whole cluster
	// (InformerStats.StartedByRead flags such informers, and
	// OnUnwatchedRead hears of each).
	RefuseUnwatchedReads bool

	// OnUnwatchedRead is called once for each informer a read started
	// (see RefuseUnwatchedReads), from the reading goroutine, before the
	// read waits for its sync; it must not block. Zero means none. The
	// framework's Manager logs each and counts them in its metrics.
	OnUnwatchedRead func(UnwatchedRead)

	// OnRequestError is called for each failed list or watch request (not
	// for the routine expiry of a watch), from the informer's goroutine; it
	// must not block. Zero means none. The framework's Manager counts them
	// in its metrics.
	OnRequestError func(RequestError)

	// Compact stores the objects of the kinds it names in a compact form:
	// each object's encoding (protobuf for built-in kinds, JSON for custom
	// resources and unstructured objects), compressed unless the kind's
	// CompactOptions say otherwise, beside the few fields the cache reads
	// itself (namespace, name, UID, resourceVersion, labels, owner
	// references), which are left out of the encoding, and with
	// managedFields stripped unless KeepManagedFields. Reads, listeners and
	// indexes get objects decoded from that form, after the Transform and
	// as if stored decoded; each decode makes a new object, so a reader
	// changing the object a Get or List of the Cache returned changes no
	// other reader's. A kind's recently decoded objects are kept (see
	// CompactOptions.Decoded) and shared by its informers' reads and
	// listeners as a decoded cache's are: do not modify those. A compact
	// ConfigMap or Pod takes about half the memory of a decoded one, or
	// less; each event costs an encode, and each read or event of an
	// object not kept decoded a decode (microseconds for a ConfigMap, tens
	// of microseconds for a Pod). It applies to the kind's typed and
	// unstructured informers; metadata informers hold metadata only and
	// are not compacted. Zero (nil) means every kind is stored decoded.
	Compact map[schema.GroupKind]CompactOptions

	// Transform changes each object before it is stored, after managedFields
	// are stripped, for example to drop large fields the controllers never
	// read. It must return an object of the same type: one of another type
	// is never handed to listeners (the event is dropped and reported
	// through utilruntime.HandleError), and reads of it fail with an error
	// naming both types. Zero means none.
	Transform cache.TransformFunc
}

// Selection says which objects of one kind an informer holds. Two readers
// with equal Selections of the same kind share one informer.
type Selection struct {
	// Kind is the kind to cache. It is required for *unstructured.Unstructured
	// and *metav1.PartialObjectMetadata and must match the scheme for typed
	// objects. Zero means the kind registered for the Go type in the scheme.
	Kind schema.GroupVersionKind

	// Namespace limits the informer to one namespace. Zero means Options.Namespace.
	Namespace string

	// Labels keeps only objects whose labels match. Zero (nil) means all.
	Labels labels.Selector

	// Fields keeps only objects whose fields match (the server supports
	// metadata.name, metadata.namespace and a few fields per kind).
	// Zero (nil) means all.
	Fields fields.Selector

	// Shard keeps only objects whose shard field hashes into the selector's
	// ranges (KEP-5866); Buckets.Selector makes one per bucket. List and
	// watch requests send it as the shardSelector parameter. Whether the
	// API server honours it (the ShardedListAndWatch feature gate, alpha
	// and off by default in Kubernetes 1.37) is asked once per resource by
	// a list of one object, whose answer says whether the server applied
	// the selector; when it did not, the informer drops the objects outside
	// the ranges itself, from lists and from watch events, and the
	// informers of one kind's shards (equal selections but for Shard) share
	// one watch of the kind, and one request for the lists they make at
	// once, each keeping its own shard's objects. The informer
	// holds the same objects either way; InformerStats.ServerSharded says
	// which way it went. A Selection that sets only Shard (and Kind) keeps
	// the kind's namespace, labels and fields from Options.ByKind. Zero
	// (nil or Empty) means all.
	Shard apisharding.Selector
}

// UnwatchedRead describes an informer a read started: see
// Options.OnUnwatchedRead.
type UnwatchedRead struct {
	// Informer names the informer started: kind, mode, namespace and
	// selectors if any.
	Informer string
	// Kind is the kind read and Mode how the reader holds it.
	Kind schema.GroupVersionKind
	Mode Mode
}

const defaultSyncTimeout = 2 * time.Minute

// MinResyncPeriod is the shortest resync period a listener can have
// (client-go's minimum); informers check every MinResyncPeriod which of
// their listeners are due.
const MinResyncPeriod = time.Second

// resyncFor returns the resync period of gk's listeners that ask for none of
// their own: zero for none.
func (o Options) resyncFor(gk schema.GroupKind) time.Duration {
	if d, ok := o.ResyncByKind[gk]; ok && d != 0 {
		return max(d, 0)
	}
	return o.ResyncPeriod
}

// codecs returns the codecs of the cache's REST clients: protobuf decoded
// in place, and JSON clients that also decode CBOR unless DisableCBOR.
func (o Options) codecs() restset.CodecsFunc {
	base := serializer.NewCodecFactory(o.Scheme).WithoutConversion()
	return func(gv schema.GroupVersion, f restset.Format) runtime.NegotiatedSerializer {
		switch {
		case f == restset.Protobuf:
			return newProtoCodecs(base, o.Scheme, !o.KeepManagedFields)
		case !o.DisableCBOR:
			return newCBORCodecs(o.Scheme, gv, o.KeepManagedFields)
		}
		return base
	}
}

func (o Options) withDefaults() Options {
	if o.Scheme == nil {
		o.Scheme = clientgoscheme.Scheme
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = defaultSyncTimeout
	}
	if o.ReadYourWritesTimeout == 0 {
		o.ReadYourWritesTimeout = defaultReadYourWritesTimeout
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("informers: Options.ResyncPeriod must not be negative, got %v", o.ResyncPeriod))
	}
	for gk, d := range o.ResyncByKind {
		if d > 0 && d < MinResyncPeriod {
			errs = append(errs, fmt.Errorf("informers: Options.ResyncByKind[%v] must be at least %v (or negative for none), got %v", gk, MinResyncPeriod, d))
		}
	}
	for gk, sel := range o.ByKind {
		if !sel.Kind.Empty() && sel.Kind.GroupKind() != gk {
			errs = append(errs, fmt.Errorf("informers: Options.ByKind[%v] has Selection.Kind %v of another kind", gk, sel.Kind))
		}
	}
	return errors.Join(errs...)
}
