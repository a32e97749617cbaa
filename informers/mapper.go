package informers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// RESTMapper maps kinds to resources using the API server's discovery
// information, fetched on first use and cached. A kind's mapping
// (RESTMapping, RESTMappings) discovers its API group alone: the group's
// versions and their resources, not every group the server has. A lookup
// by resource that names no group (KindFor, ResourceFor, ... of a resource
// whose Group is empty) may match any group, and discovers them all. Unlike
// client-go's deferred mapper it forgets what it discovered when asked for a
// kind it does not know (at most once per second), so kinds whose CRDs are
// installed while the process runs are found without a restart. A group
// one of whose versions cannot be discovered (an aggregated API that is
// down) maps the kinds of the others and is discovered again at most once
// per second, whatever the number of lookups.
type RESTMapper struct {
	dc discovery.DiscoveryInterface
	// all is the mapper of every group, made on the first lookup that needs it.
	all *restmapper.DeferredDiscoveryRESTMapper

	mu sync.Mutex
	// groups holds a mapper per discovered group; a group the server does
	// not serve maps to nil. lastReset is when discovery was last dropped,
	// and resets how often: a group discovered across a Reset is not kept
	// (it may predate a CRD the Reset was for), nor one discovered while
	// another lookup's discovery of it was stored. mu guards all three.
	groups    map[string]meta.RESTMapper
	lastReset time.Time
	resets    uint64
	// now is the clock of lastReset and of partial groups' discoveries.
	now func() time.Time
}

var (
	_ meta.RESTMapper           = (*RESTMapper)(nil)
	_ meta.ResettableRESTMapper = (*RESTMapper)(nil)
)

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
	return &RESTMapper{
		dc:     dc,
		all:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		groups: map[string]meta.RESTMapper{},
		now:    time.Now,
	}, nil
}

// group returns the mapper of one API group ("" is the core group),
// discovering the group's versions and their resources on first use; a
// group the server does not serve gives a mapper that matches nothing. A
// group some of whose versions failed discovery (an aggregated API that
// is down, say) maps the kinds of the others, and is kept for
// minResetInterval only: the first lookup after that discovers it again,
// so that the version is found once it is back, while the lookups of the
// group meanwhile (every reconcile of its kinds) do not each ask the
// server.
func (m *RESTMapper) group(name string) (meta.RESTMapper, error) {
	m.mu.Lock()
	gm, ok := m.groups[name]
	ok = ok && m.keptLocked(gm)
	resets := m.resets
	m.mu.Unlock()
	if ok {
		return gm, nil
	}
	g, failed, err := m.discoverGroup(context.Background(), name)
	if err != nil {
		return nil, err
	}
	switch {
	case g == nil:
		gm = meta.MultiRESTMapper{}
	case failed != nil:
		gm = partialGroup{restmapper.NewDiscoveryRESTMapper([]*restmapper.APIGroupResources{g}), failed, m.now()}
	default:
		gm = restmapper.NewDiscoveryRESTMapper([]*restmapper.APIGroupResources{g})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resets != resets {
		return gm, nil // not kept: see resets
	}
	if found, ok := m.groups[name]; ok && m.keptLocked(found) {
		return found, nil // another lookup's discovery, which ended first
	}
	m.groups[name] = gm
	return gm, nil
}

// keptLocked reports whether gm, a group's mapper in m.groups, is still
// good: any but a partial group discovered minResetInterval ago or more.
// m.mu must be held.
func (m *RESTMapper) keptLocked(gm meta.RESTMapper) bool {
	p, partial := gm.(partialGroup)
	return !partial || m.now().Sub(p.at) < minResetInterval
}

// partialGroup maps the kinds of a group's versions that were discovered;
// a kind it does not find may be in a version that failed, and its
// no-match error says so.
type partialGroup struct {
	meta.RESTMapper
	failed error
	// at is when the group was discovered.
	at time.Time
}

func (p partialGroup) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	out, err := p.RESTMapper.RESTMapping(gk, versions...)
	return out, p.miss(err)
}

func (p partialGroup) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	out, err := p.RESTMapper.RESTMappings(gk, versions...)
	return out, p.miss(err)
}

// miss turns a no-match error into one that names the versions that
// could not be discovered, wrapping both.
func (p partialGroup) miss(err error) error {
	if err == nil || !meta.IsNoMatchError(err) {
		return err
	}
	return fmt.Errorf("%w, and it may be in a version that could not be discovered: %w", err, p.failed)
}

// discoverGroup reads one group's versions (/api or /apis/<group>) and
// each version's resources; nil when the server does not serve the group.
// failed joins the errors of versions whose resources could not be read
// when others could; when none could, err is their error.
func (m *RESTMapper) discoverGroup(ctx context.Context, name string) (out *restmapper.APIGroupResources, failed, err error) {
	var group metav1.APIGroup
	if name == "" {
		var versions metav1.APIVersions
		if err := m.dc.RESTClient().Get().AbsPath("/api").Do(ctx).Into(&versions); err != nil {
			return nil, nil, fmt.Errorf("informers: discover the core API group: %w", err)
		}
		for _, v := range versions.Versions {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
		}
	} else {
		err := m.dc.RESTClient().Get().AbsPath("/apis", name).Do(ctx).Into(&group)
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("informers: discover API group %q: %w", name, err)
		}
	}
	if len(group.Versions) == 0 {
		return nil, nil, nil
	}
	if group.PreferredVersion.Version == "" {
		group.PreferredVersion = group.Versions[0]
	}
	out = &restmapper.APIGroupResources{Group: group, VersionedResources: map[string][]metav1.APIResource{}}
	var errs []error
	for _, v := range group.Versions {
		list, err := m.dc.ServerResourcesForGroupVersion(v.GroupVersion)
		if apierrors.IsNotFound(err) {
			continue // a version being removed while we look
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("informers: discover the resources of %s: %w", v.GroupVersion, err))
			continue
		}
		out.VersionedResources[v.Version] = list.APIResources
	}
	switch {
	case len(errs) == 0:
		return out, nil, nil
	case len(out.VersionedResources) == 0:
		return nil, nil, errors.Join(errs...)
	}
	return out, errors.Join(errs...), nil
}

// forResource returns the mapper to look resource up in: its group's, or
// every group's when it names none.
func (m *RESTMapper) forResource(resource schema.GroupVersionResource) (meta.RESTMapper, error) {
	if resource.Group == "" {
		return m.all, nil
	}
	return m.group(resource.Group)
}

// Reset forgets everything discovered; the next lookups discover again.
func (m *RESTMapper) Reset() {
	m.mu.Lock()
	clear(m.groups)
	m.resets++
	m.mu.Unlock()
	m.all.Reset()
}

// retry looks up in the mapper in returns; on a no-match error it
// refreshes discovery (rate limited) and looks up once more. A miss in a
// partial group does not: the group is discovered again once
// minResetInterval passed anyway (see group).
func retry[T any](m *RESTMapper, in func() (meta.RESTMapper, error), lookup func(meta.RESTMapper) (T, error)) (T, error) {
	var rm meta.RESTMapper
	try := func() (T, error) {
		var err error
		if rm, err = in(); err != nil {
			var zero T
			return zero, err
		}
		return lookup(rm)
	}
	out, err := try()
	if _, partial := rm.(partialGroup); err == nil || !meta.IsNoMatchError(err) || partial {
		return out, err
	}
	m.mu.Lock()
	reset := m.now().Sub(m.lastReset) >= minResetInterval
	if reset {
		m.lastReset = m.now()
	}
	m.mu.Unlock()
	if !reset {
		return out, err
	}
	m.Reset()
	return try()
}

// ofGroup returns the mapper of gk's group (see group).
func (m *RESTMapper) ofGroup(gk schema.GroupKind) func() (meta.RESTMapper, error) {
	return func() (meta.RESTMapper, error) { return m.group(gk.Group) }
}

// ofResource returns the mapper to look resource up in (see forResource).
func (m *RESTMapper) ofResource(resource schema.GroupVersionResource) func() (meta.RESTMapper, error) {
	return func() (meta.RESTMapper, error) { return m.forResource(resource) }
}

// RESTMapping returns the preferred mapping for gk, refreshing discovery on a miss.
func (m *RESTMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return retry(m, m.ofGroup(gk), func(rm meta.RESTMapper) (*meta.RESTMapping, error) { return rm.RESTMapping(gk, versions...) })
}

// RESTMappings returns every mapping for gk, refreshing discovery on a miss.
func (m *RESTMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return retry(m, m.ofGroup(gk), func(rm meta.RESTMapper) ([]*meta.RESTMapping, error) { return rm.RESTMappings(gk, versions...) })
}

// KindFor returns the kind of resource, refreshing discovery on a miss.
func (m *RESTMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return retry(m, m.ofResource(resource), func(rm meta.RESTMapper) (schema.GroupVersionKind, error) { return rm.KindFor(resource) })
}

// KindsFor returns the kinds resource may be, refreshing discovery on a miss.
func (m *RESTMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return retry(m, m.ofResource(resource), func(rm meta.RESTMapper) ([]schema.GroupVersionKind, error) { return rm.KindsFor(resource) })
}

// ResourceFor returns the full name of resource, refreshing discovery on a miss.
func (m *RESTMapper) ResourceFor(resource schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return retry(m, m.ofResource(resource), func(rm meta.RESTMapper) (schema.GroupVersionResource, error) { return rm.ResourceFor(resource) })
}

// ResourcesFor returns the full names resource may have, refreshing discovery on a miss.
func (m *RESTMapper) ResourcesFor(resource schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return retry(m, m.ofResource(resource), func(rm meta.RESTMapper) ([]schema.GroupVersionResource, error) { return rm.ResourcesFor(resource) })
}

// ResourceSingularizer returns the singular of a resource's plural name,
// discovering every group.
func (m *RESTMapper) ResourceSingularizer(resource string) (string, error) {
	return m.all.ResourceSingularizer(resource)
}

// String describes the mapper.
func (m *RESTMapper) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("informers.RESTMapper{%d groups discovered}", len(m.groups))
}
