package restset

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Format is the wire format a REST client sends and asks for.
type Format int

const (
	// JSON sends JSON and asks for JSON; a request may still ask for
	// another format with its own Accept header, which the Set's codecs
	// must then decode.
	JSON Format = iota
	// Protobuf sends protobuf and asks for protobuf, JSON second: for the
	// built-in kinds, which have protobuf encodings.
	Protobuf
)

func (f Format) String() string {
	switch f {
	case JSON:
		return "JSON"
	case Protobuf:
		return "protobuf"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// CodecsFunc returns the codecs of the REST client for gv and f: they
// encode requests and decode answers.
type CodecsFunc func(gv schema.GroupVersion, f Format) runtime.NegotiatedSerializer

// Set makes and keeps the REST clients of one API server and identity. A
// Set is safe for concurrent use.
type Set struct {
	cfg    *rest.Config
	http   *http.Client
	codecs CodecsFunc

	mu sync.Mutex
	// clients holds the client of each group version and format; mu
	// guards it.
	clients map[key]*rest.RESTClient
}

type key struct {
	gv     schema.GroupVersion
	format Format
}

// New returns a Set for the API server cfg points at, sending requests
// through httpClient (made from cfg when nil) behind a fence transport (see
// WithFence), all within one client-side rate limit. codecs returns each
// client's codecs; nil means scheme's, without conversion, for every
// format.
func New(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme, codecs CodecsFunc) (*Set, error) {
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("HTTP client for %s: %w", cfg.Host, err)
		}
	}
	if codecs == nil {
		base := serializer.NewCodecFactory(scheme).WithoutConversion()
		codecs = func(schema.GroupVersion, Format) runtime.NegotiatedSerializer { return base }
	}
	fenced := *httpClient
	fenced.Transport = fenceTransport{base: transportOf(httpClient)}
	return &Set{cfg: sharedRateLimit(cfg), http: &fenced, codecs: codecs, clients: map[key]*rest.RESTClient{}}, nil
}

// sharedRateLimit returns a copy of cfg whose RateLimiter, unless it has
// one or QPS is negative (no limit), is a token bucket of cfg's QPS and
// Burst (client-go's defaults when zero), made once: every client of the
// Set draws on it, as a clientset's clients do, so that QPS bounds the
// Set's requests and not each group version's.
func sharedRateLimit(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter != nil || cfg.QPS < 0 {
		return cfg
	}
	qps, burst := cfg.QPS, cfg.Burst
	if qps == 0 {
		qps = rest.DefaultQPS
	}
	if burst == 0 {
		burst = rest.DefaultBurst
	}
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return cfg
}

// For returns the client of gv that speaks f, making it on first use.
func (s *Set) For(gv schema.GroupVersion, f Format) (*rest.RESTClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{gv: gv, format: f}
	if rc, ok := s.clients[k]; ok {
		return rc, nil
	}
	cfg := rest.CopyConfig(s.cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = s.codecs(gv, f)
	switch f {
	case Protobuf:
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	default:
		cfg.ContentType = runtime.ContentTypeJSON
		cfg.AcceptContentTypes = runtime.ContentTypeJSON
	}
	rc, err := rest.RESTClientForConfigAndClient(cfg, s.http)
	if err != nil {
		return nil, fmt.Errorf("%s REST client for %s: %w", f, gv, err)
	}
	s.clients[k] = rc
	return rc, nil
}

// Len returns how many clients the Set has made.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// fenceKey is the context key of a request's fence.
type fenceKey struct{}

// WithFence returns ctx carrying fence: a request sent on it through a
// Set's client is refused, with fence's error, while fence fails. The
// check is made as the request leaves the process, after client-side rate
// limiting, on every attempt. fence must be safe for concurrent use.
func WithFence(ctx context.Context, fence func() error) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// writeFenceKey is the context key of a write fence.
type writeFenceKey struct{}

// WithWriteFence returns a copy of ctx under which every client.Client
// refuses writes while fence fails, as it does while its own fence
// (client.Options.Fence) fails: fence is called before each write and
// again as each request leaves the process, and a refused write's error
// wraps fence's. A fence already in ctx is replaced. The framework puts one
// in the context of each reconcile of a sharded controller, which fails
// once the process no longer holds the key's bucket
// (sharding.ErrBucketNotHeld). fence must be safe for concurrent use.
func WithWriteFence(ctx context.Context, fence func() error) context.Context {
	return context.WithValue(ctx, writeFenceKey{}, fence)
}

// WriteFence returns the fence WithWriteFence put in ctx, nil for none.
func WriteFence(ctx context.Context) func() error {
	fence, _ := ctx.Value(writeFenceKey{}).(func() error)
	return fence
}

// fenceTransport refuses the requests whose fence fails: the last check
// before a fenced request leaves the process.
type fenceTransport struct{ base http.RoundTripper }

func (t fenceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if fence, _ := r.Context().Value(fenceKey{}).(func() error); fence != nil {
		if err := fence(); err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, err
		}
	}
	return t.base.RoundTrip(r)
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}
