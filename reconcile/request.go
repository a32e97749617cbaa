package reconcile

// Request names the object to reconcile. It is comparable and used as the
// work-queue key, so two events for one object collapse into one reconcile.
// Why a reconcile was requested is deliberately not part of the Request.
// Its fields are those of types.NamespacedName, the key of every read
// (client.Client.Get, informers' Get), so types.NamespacedName(req) is one.
type Request struct {
	// Namespace is empty for cluster-scoped objects.
	Namespace string `json:"namespace"`
	// Name is the object's name.
	Name string `json:"name"`
}

// String returns "namespace/name", or "name" for a cluster-scoped object,
// the same form as client-go's cache keys.
func (r Request) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}
