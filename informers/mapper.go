package informers

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// RESTMapper maps kinds to resources using the API server's discovery
// information, fetched on first use and cached. Unlike client-go's deferred
// mapper it forgets its cache when asked for a kind it does not know (at most
// once per second), so kinds whose CRDs are installed while the process runs
// are found without a restart.
type RESTMapper struct {
	*restmapper.DeferredDiscoveryRESTMapper

	mu sync.Mutex
	// lastReset is when the discovery cache was last dropped; mu guards it.
	lastReset time.Time
}

var _ meta.RESTMapper = (*RESTMapper)(nil)

// minResetInterval bounds how often a miss refreshes discovery.
const minResetInterval = time.Second

// NewRESTMapper returns a discovery-backed RESTMapper for the API server cfg
// points at. httpClient may be nil, in which case one is built from cfg.
func NewRESTMapper(cfg *rest.Config, httpClient *http.Client) (*RESTMapper, error) {
	var (
		dc  *discovery.DiscoveryClient
		err error
	)
	if httpClient != nil {
		dc, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	} else {
		dc, err = discovery.NewDiscoveryClientForConfig(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("informers: discovery client for %s: %w", cfg.Host, err)
	}
	return &RESTMapper{DeferredDiscoveryRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// retry runs lookup; on a no-match error it refreshes discovery (rate
// limited) and runs it once more.
func retry[T any](m *RESTMapper, lookup func() (T, error)) (T, error) {
	out, err := lookup()
	if err == nil || !meta.IsNoMatchError(err) {
		return out, err
	}
	m.mu.Lock()
	reset := time.Since(m.lastReset) >= minResetInterval
	if reset {
		m.lastReset = time.Now()
	}
	m.mu.Unlock()
	if !reset {
		return out, err
	}
	m.Reset()
	return lookup()
}

// RESTMapping returns the preferred mapping for gk, refreshing discovery on a miss.
func (m *RESTMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return retry(m, func() (*meta.RESTMapping, error) {
		return m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	})
}

// RESTMappings returns every mapping for gk, refreshing discovery on a miss.
func (m *RESTMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return retry(m, func() ([]*meta.RESTMapping, error) {
		return m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	})
}

// KindFor returns the kind of resource, refreshing discovery on a miss.
func (m *RESTMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return retry(m, func() (schema.GroupVersionKind, error) {
		return m.DeferredDiscoveryRESTMapper.KindFor(resource)
	})
}
