package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/restset"
	"github.com/converge-dev/converge/object"
)

// Options configures New and NewAPIReader.
type Options struct {
	// Config is the API server's configuration. Zero means the Cache's:
	// requests are then sent with the cache's REST clients
	// (informers.Cache.RESTClient), one per group version, shared with the
	// cache and every client built on it. Required when Cache is not set.
	Config *rest.Config
	// HTTPClient sends the requests made with Config, and may be set only
	// with Config (without it, requests go with the Cache's REST clients
	// and their HTTP client). Zero means one built from Config
	// (rest.HTTPClientFor).
	HTTPClient *http.Client
	// Scheme maps typed objects to their kinds. Required.
	Scheme *runtime.Scheme
	// Mapper maps kinds to resources. Required.
	Mapper meta.RESTMapper
	// Cache serves a Client's reads and learns of its writes, so that reads
	// show them. Required by New. NewAPIReader sends its requests with the
	// Cache's REST clients, and takes either Config or Cache, not both.
	Cache *informers.Cache
	// Fence says whether a write may be sent now: nil, or why not. A Client
	// calls it before each write and again as each request leaves the
	// process (after client-side rate limiting); a refused write's error
	// wraps the fence's. It must be safe for concurrent use. Zero means
	// writes are never refused. NewAPIReader, which never writes, refuses
	// it.
	Fence func() error
	// RequestLogger adjusts the logger client-go logs each request to (the
	// request context's logger), for example to cap its verbosity. Zero
	// means the context's logger as it is.
	RequestLogger func(logr.Logger) logr.Logger
	// Cluster names the cluster the client talks to at the head of each of
	// its errors ("cluster edge-1: create ConfigMap ns/name: ..."), which
	// wrap the cause with %w. Zero means the errors name no cluster (the
	// manager's own).
	Cluster string
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.Fence == nil {
		o.Fence = func() error { return nil }
	}
	if o.RequestLogger == nil {
		o.RequestLogger = func(l logr.Logger) logr.Logger { return l }
	}
	return o
}

// validate reports the first required field missing, or set where the
// constructor would not read it; reader says whether it checks for
// NewAPIReader (else New).
func (o Options) validate(reader bool) error {
	switch {
	case o.Scheme == nil:
		return errors.New("client: Options.Scheme is required")
	case o.Mapper == nil:
		return errors.New("client: Options.Mapper is required")
	case !reader && o.Cache == nil:
		return errors.New("client: Options.Cache is required")
	case o.Config == nil && o.Cache == nil:
		return errors.New("client: Options.Config is required when Options.Cache is not set")
	case o.HTTPClient != nil && o.Config == nil:
		return errors.New("client: Options.HTTPClient is set without Options.Config: requests then go with the Cache's REST clients; set Config too, or leave HTTPClient zero")
	case reader && o.Fence != nil:
		return errors.New("client: NewAPIReader: Options.Fence is set, but an APIReader never writes: leave it zero")
	case reader && o.Config != nil && o.Cache != nil:
		return errors.New("client: NewAPIReader: Options.Config and Options.Cache are both set, but an APIReader reads with one: the Cache's REST clients, or its own for Config")
	}
	return nil
}

// restClients returns what gives the REST client of each group version:
// the cache's when Config is zero, else a set of the options' own.
func (o Options) restClients() (func(schema.GroupVersion) (*rest.RESTClient, error), error) {
	if o.Config == nil {
		return o.Cache.RESTClient, nil
	}
	set, err := restset.New(o.Config, o.HTTPClient, o.Scheme, nil)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return func(gv schema.GroupVersion) (*rest.RESTClient, error) { return set.For(gv, restset.JSON) }, nil
}

// New returns a Client that reads from opts.Cache and writes to the API
// server of opts.Config (else the cache's), refusing writes while
// opts.Fence fails. It fails when a required option is missing.
func New(opts Options) (*Client, error) {
	if err := opts.validate(false); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	restFor, err := opts.restClients()
	if err != nil {
		return nil, err
	}
	return &Client{
		scheme:     opts.Scheme,
		mapper:     opts.Mapper,
		cache:      opts.Cache,
		rest:       restFor,
		allowWrite: opts.Fence,
		logger:     opts.RequestLogger,
		cluster:    opts.Cluster,
	}, nil
}

// NewAPIReader returns an APIReader that reads from the API server of
// opts.Config, else with the REST clients of opts.Cache (never from the
// cache itself). It fails when a required option is missing, or when one
// it would not read is set: Fence, both Config and Cache, or HTTPClient
// without Config.
func NewAPIReader(opts Options) (*APIReader, error) {
	if err := opts.validate(true); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	restFor, err := opts.restClients()
	if err != nil {
		return nil, err
	}
	return &APIReader{
		scheme:  opts.Scheme,
		mapper:  opts.Mapper,
		rest:    restFor,
		logger:  opts.RequestLogger,
		cluster: opts.Cluster,
	}, nil
}

// quietly returns ctx with its logger adjusted by adjust, for client-go to
// log a request to.
func quietly(ctx context.Context, adjust func(logr.Logger) logr.Logger) context.Context {
	return klog.NewContext(ctx, adjust(klog.FromContext(ctx)))
}

// NewObject returns an empty object of kind gvk: typed when scheme knows
// the kind, unstructured (with its apiVersion and kind set) otherwise.
func NewObject(scheme *runtime.Scheme, gvk schema.GroupVersionKind) (object.Object, error) {
	if scheme.Recognizes(gvk) {
		o, err := scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		obj, ok := o.(object.Object)
		if !ok {
			return nil, fmt.Errorf("%v has no object metadata", gvk)
		}
		return obj, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
