package fake

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/object"
)

// ErrClosed is returned for requests sent after Close.
var ErrClosed = errors.New("fake: server closed")

// Server is an API server in memory. A Server is safe for concurrent use;
// its requests are served one write at a time, in the order they arrive.
type Server struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	kinds  kinds
	types  typeConverter
	now    func() time.Time
	// handler serves the API; Config's transport sends requests to it.
	handler http.Handler

	mu sync.Mutex
	// rv is the last resourceVersion handed out; mu guards it and the
	// fields below.
	rv int64
	// objects are the stored objects by kind and key: never modified once
	// stored (a write stores a new object), so they may be encoded and
	// handed to watches without copies.
	objects map[*kind]map[types.NamespacedName]object.Object
	// uids locates every stored object by UID.
	uids map[types.UID]ref
	// history is every change, in resourceVersion order.
	history []event
	// changed is closed (and replaced) on each change.
	changed chan struct{}
	// managers are the field managers by kind and subresource.
	managers map[managerKey]*managedfields.FieldManager
	// closed is closed by Close.
	closed chan struct{}
	// closeOnce guards closed.
	closeOnce sync.Once
	// writer is the identity of the request holding mu to write.
	writer string
	// lag is how many events each identity's watches hold back (see
	// LagWatches).
	lag map[string]int
	// watches are the open watch streams.
	watches map[*watchStream]struct{}

	// faults are the hooks of Intercept and CrashAfter.
	faults faults
}

// NewServer returns a server holding opts.Objects. Close it when done (or
// use Start, which does in the test's cleanup).
func NewServer(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	tc, err := newTypeConverter(opts.Scheme, opts.CRDs)
	if err != nil {
		return nil, fmt.Errorf("fake: Options.CRDs: %w", err)
	}
	clusterScoped, noStatus := groupKinds(opts.Scheme, opts.ClusterScoped), groupKinds(opts.Scheme, opts.NoStatusSubresource)
	crdClusterScoped, crdNoStatus := opts.crdScopes()
	for _, gvk := range crdClusterScoped {
		clusterScoped[gvk.GroupKind()] = true
	}
	for _, gvk := range crdNoStatus {
		noStatus[gvk.GroupKind()] = true
	}
	s := &Server{
		// An empty server's lists carry resourceVersion 1, as a new etcd's
		// do: a watch from a listed version is never mistaken for one
		// from "0" (any version, starting with every object).
		rv:       1,
		scheme:   opts.Scheme,
		codecs:   serializer.NewCodecFactory(opts.Scheme, serializer.WithSerializer(cbor.NewSerializerInfo)),
		kinds:    newKinds(opts.Scheme, clusterScoped, noStatus),
		types:    tc,
		now:      func() time.Time { return time.Now().Truncate(time.Second) },
		objects:  map[*kind]map[types.NamespacedName]object.Object{},
		uids:     map[types.UID]ref{},
		changed:  make(chan struct{}),
		managers: map[managerKey]*managedfields.FieldManager{},
		closed:   make(chan struct{}),
		lag:      map[string]int{},
		watches:  map[*watchStream]struct{}{},
	}
	s.handler = s.routes()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, obj := range opts.Objects {
		k, err := s.kindOf(obj)
		if err != nil {
			return nil, fmt.Errorf("fake: Options.Objects[%d] %s: %w", i, describe(obj), err)
		}
		typed, err := s.typedObject(k, obj.DeepCopyObject())
		if err != nil {
			return nil, fmt.Errorf("fake: Options.Objects[%d] %s: %w", i, describe(obj), err)
		}
		if _, err := s.createLocked(k, obj.GetNamespace(), typed, seedManager, false, true); err != nil {
			return nil, fmt.Errorf("fake: Options.Objects[%d] %s: %w", i, describe(obj), err)
		}
	}
	return s, nil
}

// seedManager is the field manager Options.Objects are created under.
const seedManager = "fake-seed"

// Start returns a server holding opts.Objects that is closed when t's test
// ends; it fails t if opts is invalid.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Config returns a configuration for clients of this server: requests go
// to the server in memory, through no network. Each call returns a new
// Config.
func (s *Server) Config() *rest.Config { return s.ConfigAs("") }

// ConfigAs is Config for clients of the given identity: Intercept,
// CrashAfter and LagWatches tell apart the requests of each identity
// (Config's identity is ""). Several configurations may share one.
func (s *Server) ConfigAs(identity string) *rest.Config {
	return &rest.Config{
		Host:      "http://fake.invalid",
		Transport: &transport{server: s, identity: identity},
		// The server never throttles; neither should its clients.
		QPS:   -1,
		Burst: -1,
	}
}

// Close ends every watch and makes later requests fail with ErrClosed.
// It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

// kindOf returns the served kind of obj.
func (s *Server) kindOf(obj runtime.Object) (*kind, error) {
	gvks, _, err := s.scheme.ObjectKinds(obj)
	if err != nil {
		return nil, err
	}
	for _, gvk := range gvks {
		if k, ok := s.kinds.byGVK[gvk]; ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("kind %v is not served (it needs object metadata and a list kind in the scheme)", gvks)
}

func groupKinds(s *runtime.Scheme, objs []object.Object) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, obj := range objs {
		gvks, _, _ := s.ObjectKinds(obj)
		for _, gvk := range gvks {
			out[gvk.GroupKind()] = true
		}
	}
	return out
}

// randomSuffix returns five characters for generateName, from the
// alphabet the API server uses.
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
