package workload

// Fleet is the workload of many clusters: one converge controller of
// ConfigMaps in every engaged cluster (cluster.Scope{Remote: true}). It has
// no objects of its own kind; its clusters are namespaces of the control
// plane (labelled FleetLabel) and kubeconfig Secrets (in FleetSecrets,
// labelled converge.dev/cluster=true). converge only: no other framework
// has a manager of many clusters.
const Fleet Kind = "fleet"

const (
	// FleetLabel, with the value "true", makes a namespace a cluster of the
	// fleet contender (cluster/namespaces).
	FleetLabel = "bench.converge.dev/fleet"
	// FleetSecrets is the namespace whose kubeconfig Secrets are clusters
	// of the fleet contender (cluster/secrets).
	FleetSecrets = "bench-fleet-secrets"
	// FleetHome is the one namespace whose ConfigMaps the fleet
	// contender's own cluster caches: the others are clusters of their
	// own, and caching them twice would count their objects twice.
	FleetHome = "bench-fleet-home"
	// PollAnnotation on a ConfigMap makes the fleet contender read it
	// again from its cluster's API server (not the cache) on each
	// reconcile, and reconcile it again after the duration it holds: a
	// controller that polls its cluster, whose reconciles hang while the
	// cluster is unreachable.
	PollAnnotation = "bench.converge.dev/poll"
)
