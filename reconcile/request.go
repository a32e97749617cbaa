package reconcile

// Request names the object to reconcile: its cluster, namespace and name.
// It is comparable and used as the work-queue key, so two events for one
// object collapse into one reconcile. Why a reconcile was requested is
// deliberately not part of the Request.
//
// Namespace and Name are those of types.NamespacedName, the key of every
// read (client.Client.Get, informers' Get):
// types.NamespacedName{Namespace: req.Namespace, Name: req.Name}.
type Request struct {
	// Cluster names the cluster the object is in, as the manager's set of
	// engaged clusters names it (package cluster). Empty means the
	// manager's own cluster, the one its configuration points at: every
	// request of a controller that watches only that cluster.
	Cluster string `json:"cluster,omitempty"`
	// Namespace is empty for cluster-scoped objects.
	Namespace string `json:"namespace"`
	// Name is the object's name.
	Name string `json:"name"`
}

// String returns "namespace/name", or "name" for a cluster-scoped object,
// the same form as client-go's cache keys; for an object in another
// cluster than the manager's own, it is prefixed by the cluster's name and
// a colon: "edge-1:namespace/name".
func (r Request) String() string {
	key := r.Name
	if r.Namespace != "" {
		key = r.Namespace + "/" + r.Name
	}
	if r.Cluster != "" {
		return r.Cluster + ":" + key
	}
	return key
}
