package informers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/client-go/tools/cache"
)

// entry is one shared informer and what the cache knows about its health.
type entry struct {
	key      informerKey
	desc     string
	cache    *Cache
	informer cache.SharedIndexInformer
	// goType is the Go type the scheme decodes the kind as, which every
	// object of a typed informer has; nil for unstructured and metadata
	// ones.
	goType reflect.Type
	// compact is the codec of the kind's compact form when Options.Compact
	// names it (and the informer is not a metadata one): the store then
	// holds *compactObject records. Nil means objects are stored decoded.
	compact *compactCodec
	// selector is the informer's label selector, nil for all labels.
	selector labels.Selector
	// shard is the informer's shard selector compiled, and shardSel the
	// selector itself; nil for all objects.
	shard    *shardFilter
	shardSel apisharding.Selector
	// serverSharded is set once the API server was found to apply shard;
	// while false, the informer filters its lists and watches itself.
	serverSharded atomic.Bool
	// resync is the resync period of listeners that ask for none of their
	// own (Options.ResyncByKind or ResyncPeriod); zero for none.
	resync time.Duration
	// indexMu serializes Informer.AddIndex, so that it may read the
	// indexer's index names (which client-go reads without its lock).
	indexMu sync.Mutex

	// pinned is set when a handle from For or ForObject holds the entry, and
	// stop cancels its informer's context once it runs; the cache's mu
	// guards both.
	pinned bool
	stop   context.CancelFunc
	// dropped is set when the cache forgot the entry (see dropUnpinned and
	// Informer.Stop), and stopped when Informer.Stop did.
	dropped atomic.Bool
	stopped atomic.Bool

	// mapping is the REST mapping last resolved for the kind, nil before the
	// first list or watch.
	mapping atomic.Pointer[meta.RESTMapping]
	// lists counts list and watch-list requests: one per initial sync and one
	// per relist after a watch expired or failed.
	lists atomic.Int64
	// watching is set when a watch request returned an open stream, and
	// cleared when a list or watch request starts (see InformerStats.Watching).
	watching atomic.Bool

	// counts are the informer's object counts (see counts), kept by the
	// handlers it has anyway.
	counts counts
	// size estimates the bytes of the informer's objects, and indexes
	// counts its indexes (client-go's count is not safe to read while an
	// index is added).
	size    sizeSampler
	indexes atomic.Int64
	// startedByRead is set when a read (not For or ForObject) made the
	// informer; it never changes after.
	startedByRead bool

	mu sync.Mutex
	// lastErr is the cause of the last failed list or watch, nil once one
	// succeeds again; mu guards it and lastErrAt.
	lastErr   error
	lastErrAt time.Time
}

// recordResult notes the outcome of a list or watch request.
func (e *entry) recordResult(err error) {
	if err != nil && ignorable(err) {
		return
	}
	e.mu.Lock()
	e.lastErr = err
	if err != nil {
		e.lastErrAt = time.Now()
	}
	e.mu.Unlock()
}

// ignorable reports errors that are part of normal watch life: an expired
// resource version (the reflector relists) and a closed stream.
func ignorable(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.Canceled)
}

// reportError hands a failed request to Options.OnRequestError.
func (e *entry) reportError(verb string, err error) {
	if h := e.cache.opts.OnRequestError; h != nil && !ignorable(err) {
		h(RequestError{Informer: e.desc, Kind: e.key.gvk, Resource: e.resource(), Namespace: e.key.namespace, Verb: verb, Class: ErrorClass(err), Err: err})
	}
}

func (e *entry) onWatchError(ctx context.Context, r *cache.Reflector, err error) {
	e.recordResult(err)
	cache.DefaultWatchErrorHandler(ctx, r, err)
}

func (e *entry) cause() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastErr
}

// health is nil when the informer synced and its last request succeeded.
func (e *entry) health(started bool) error {
	cause := e.cause()
	if cause == nil && (e.informer.HasSynced() || !started) {
		return nil
	}
	return &SyncError{Description: e.desc, Kind: e.key.gvk, Resource: e.resource(), Cause: cause}
}

func (e *entry) syncError(waited time.Duration, ctxErr error) error {
	cause := e.cause()
	if cause == nil {
		cause = ctxErr
	}
	return &SyncError{Description: e.desc, Kind: e.key.gvk, Resource: e.resource(), Waited: waited, Cause: cause}
}

// resource names the API resource for messages, or "" when never resolved.
func (e *entry) resource() string {
	if m := e.mapping.Load(); m != nil {
		return m.Resource.GroupResource().String()
	}
	return ""
}

// SyncError says why an informer has not synced, or stopped being healthy.
type SyncError struct {
	// Description names the informer: kind, and namespace and selectors if any.
	Description string
	// Kind is the informer's kind.
	Kind schema.GroupVersionKind
	// Resource is the API resource ("deployments.apps"), empty if the kind
	// never mapped to one.
	Resource string
	// Waited is how long a sync was waited for; zero from Health.
	Waited time.Duration
	// Cause is the last error seen listing or watching, or the context's
	// error when no request failed (the API server did not answer in time).
	Cause error
}

// Error names the informer, how long it waited, and the cause.
func (e *SyncError) Error() string {
	msg := "cache for " + e.Description
	if e.Waited > 0 {
		msg += fmt.Sprintf(" not synced after %v", e.Waited.Round(time.Millisecond))
	} else {
		msg += " not ready"
	}
	if e.Cause == nil {
		return msg + ": initial list in progress"
	}
	return msg + ": " + explain(e.Cause, e.Resource) + ": " + e.Cause.Error()
}

// Unwrap returns the cause.
func (e *SyncError) Unwrap() error { return e.Cause }
