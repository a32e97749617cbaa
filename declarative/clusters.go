package declarative

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// InCluster puts c in the engaged cluster named name (see package cluster)
// rather than in its parent's: converge applies, reverts, prunes and
// deletes it there, through that cluster's client. Zero (not called), or
// "", means the parent's own cluster, the manager's.
//
// No owner reference can reach a parent in another cluster, and that
// cluster's garbage collector would delete a child carrying one (its owner
// is not there): c is linked to its parent by its labels and the parent's
// ledger (LedgerAnnotation, whose entry names the cluster: "UID=Kind.group@
// edge-1/namespace/name"), as a child in another namespace is, and the
// parent gets converge's finalizer. A c that carries owner references is a
// configuration error naming it (ChildGraphReason).
//
// While the cluster is not engaged, or is unhealthy (its probes fail), c is
// left as it is: the parent's Ready condition says it waits for the
// cluster, nothing is pruned there, and the parent's deletion waits for it;
// the children in other clusters are applied meanwhile, and the parent is
// reconciled again once the cluster is engaged, or healthy again. After
// names children of c's own cluster; LiveChild and LiveChildren read the
// parent's cluster only.
//
// The controller watches its children in every engaged cluster (the objects
// labelled with its ManagerLabel, see Declarative.Sources), so a change to
// c there reconciles the parent and is reverted.
//
// A manager that spreads its clusters over its sharding ring
// (framework.Options.Sharding.Clusters) refuses c: the member that
// reconciles the parent holds only its share of the clusters. Nothing is
// applied for the parent, whose Ready condition (ChildGraphReason) and
// terminal reconcile error name the parent, c and its cluster; a parent
// whose ledger names children in another cluster (made before the
// clusters were spread) keeps its finalizer, and its reconciles fail
// terminally saying so.
func (c *Child[C]) InCluster(name string) *Child[C] {
	c.cluster = name
	return c
}

// targeted is a declared child that InCluster put in another cluster, as
// graphOf hands it to prepare.
type targeted struct {
	child   any
	cluster string
}

// objectIn names an object of kind gk in cluster across kinds, clusters and
// namespaces: objectID for the manager's own cluster, "Kind.group@cluster/
// namespace/name" for another.
func objectIn(gk schema.GroupKind, cluster, namespace, name string) string {
	if cluster == "" {
		return objectID(gk, namespace, name)
	}
	return gk.String() + "@" + cluster + "/" + key(namespace, name)
}

// inCluster returns id, an objectID, as the objectIn name of that object
// in cluster.
func inCluster(id, cluster string) string {
	if cluster == "" {
		return id
	}
	gk, rest, _ := strings.Cut(id, "/")
	return gk + "@" + cluster + "/" + rest
}

// clusterOf returns the cluster part of an objectIn name, "" for the
// manager's own cluster.
func clusterOf(id string) string {
	gk, _, _ := strings.Cut(id, "/")
	_, cl, _ := strings.Cut(gk, "@")
	return cl
}

// site is a cluster children live in, with what reads and writes them
// there: the manager's own cluster (name "", cl nil) or an engaged one.
type site struct {
	name   string
	cl     *cluster.Cluster
	client *client.Client
	live   metadata.Interface
	mapper meta.RESTMapper
	// manager is the controller's field manager (Options.FieldManager).
	manager string
}

// remote reports whether s is another cluster than the parent's.
func (s *site) remote() bool { return s.name != "" }

// childReader reads one child kind in one cluster.
type childReader interface {
	Get(ctx context.Context, key types.NamespacedName) (object.Object, error)
	List(ctx context.Context, opts ...informers.ListOption) ([]object.Object, error)
}

// reader returns the reader of kind ck in s: the manager's cache, or, in
// another cluster, the informer of that cluster's cache holding the
// objects labelled with this controller's ManagerLabel, which the
// controller's sources of that cluster read too.
func (s *site) reader(ck *childKind) (childReader, error) {
	if !s.remote() {
		return ck.cached, nil
	}
	inf, err := informers.ForObject(s.cl.Cache(), ck.read, memberSelection(ck.gvk, s.manager))
	if err != nil {
		return nil, fmt.Errorf("read %s in cluster %s: %w", ck.gvk.Kind, s.name, err)
	}
	return inf, nil
}

// read reads the object of c's kind namespace/name from the cache of c's
// cluster (which must be usable: at set).
func (c child) read(ctx context.Context, namespace, name string) (object.Object, error) {
	r, err := c.at.reader(c.kind)
	if err != nil {
		return nil, err
	}
	return r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name})
}

// memberSelection is what a cluster other than the parent's caches of child
// kind gvk: the children of the controller whose field manager is manager.
func memberSelection(gvk schema.GroupVersionKind, manager string) informers.Selection {
	return informers.Selection{Kind: gvk, Labels: labels.SelectorFromSet(labels.Set{ManagerLabel: labelValue(manager)})}
}

// memberSource watches the children of kind ck this controller put in
// engaged clusters other than the manager's own: a change to one
// reconciles its parent, in the manager's own cluster, and so do the
// parents that wait for a cluster once it is engaged.
func (d *Declarative[T]) memberSource(ck *childKind) framework.Source {
	gk := ck.gvk.GroupKind()
	src := framework.Map(func(ctx context.Context, child object.Object) []reconcile.Request {
		id := objectIn(gk, cluster.From(ctx).Name(), child.GetNamespace(), child.GetName())
		return append(d.parentOf(child), d.conflicts.parentsOf(id)...)
	})
	return framework.InOtherClusters(framework.WithSelection(src, memberSelection(ck.gvk, d.opts.FieldManager)), func(ctx context.Context) []reconcile.Request {
		return d.clusterWaits.take(cluster.From(ctx).Name())
	})
}

// sites keeps a site per engaged cluster children were put in. It is safe
// for concurrent use.
type sites struct {
	// spread is set when the manager spreads its clusters over its
	// sharding ring (sharding.Options.Clusters): no other cluster is a
	// site then (see spreadRefusal).
	spread bool

	mu sync.Mutex
	// byCluster holds the site of each engaged cluster by its Cluster (a
	// new engagement of a name is a new one); mu guards it.
	byCluster map[*cluster.Cluster]*site
}

// siteOf returns the site of cluster name: the manager's own for "", else
// the engaged cluster of that name, with the reason it cannot be used now
// ("not engaged", "unhealthy since ..."), which the parent's Ready
// condition gives.
func (d *Declarative[T]) siteOf(name string) (*site, string, error) {
	if name == "" {
		return d.local, "", nil
	}
	if d.sites.spread {
		return nil, "", reconcile.Terminal(spreadRefusal(name))
	}
	cl, err := d.mgr.Clusters().Get(name)
	if err != nil {
		return nil, fmt.Sprintf("cluster %s (not engaged)", name), nil
	}
	if h := cl.Health(); h.State != cluster.StateReady {
		return nil, fmt.Sprintf("cluster %s (%s since %s)", name, h.State, h.Since.UTC().Format("2006-01-02T15:04:05Z")), nil
	}
	d.sites.mu.Lock()
	defer d.sites.mu.Unlock()
	if s := d.sites.byCluster[cl]; s != nil {
		return s, "", nil
	}
	live, err := metadata.NewForConfig(cl.Config())
	if err != nil {
		return nil, "", fmt.Errorf("cluster %s: metadata client: %w", name, err)
	}
	for _, ck := range d.children {
		if err := indexByParent(cl.Cache(), ck.gvk.GroupKind()); err != nil {
			return nil, "", fmt.Errorf("cluster %s: child kind %v: %w", name, ck.gvk, err)
		}
	}
	if d.sites.byCluster == nil {
		d.sites.byCluster = map[*cluster.Cluster]*site{}
	}
	for old := range d.sites.byCluster {
		if old.Health().State == cluster.StateDisengaged {
			delete(d.sites.byCluster, old)
		}
	}
	s := &site{name: name, cl: cl, client: cl.Client(), live: live, mapper: cl.RESTMapper(), manager: d.opts.FieldManager}
	d.sites.byCluster[cl] = s
	return s, "", nil
}

// spreadRefusal is why a child cannot be put in cluster name (see
// Child.InCluster) when the manager spreads its clusters over its ring: the
// member that reconciles the parent holds only its share of the clusters,
// and may hand any of them over at any time.
func spreadRefusal(name string) error {
	return fmt.Errorf("cluster %s: the manager spreads its clusters over the members of its sharding ring (Options.Sharding.Clusters), so the member that reconciles the parent may not hold it: children in other clusters (Child.InCluster) cannot be used with spread clusters; a controller of every cluster (ControllerOptions.Clusters.Remote) reconciles that cluster's objects on the member that holds it", name)
}

// ledgerClusters returns the clusters other than the manager's own that
// parent's ledger records children (or claims) in, sorted.
func (d *Declarative[T]) ledgerClusters(parent object.Object) []string {
	var out []string
	for id := range d.ledger.recorded(parent) {
		if cl := clusterOf(strings.TrimPrefix(id, "?")); cl != "" && !slices.Contains(out, cl) {
			out = append(out, cl)
		}
	}
	slices.Sort(out)
	return out
}
