// Package cluster is the clusters a manager talks to: each Cluster is one
// API server with its own cache, client, API reader and REST mapper; a Set
// is the registry of the engaged ones; a Provider discovers clusters and
// tells the Set to engage and disengage them.
//
// The manager's own cluster, the one its rest.Config points at, is named
// "" and is engaged by the manager itself, through the same Set, when its
// cache has synced. Other clusters are engaged from Targets that providers
// hand to an Engager (the Set): package cluster/secrets reads kubeconfigs
// from Secrets of the manager's own cluster, package cluster/namespaces
// makes each namespace of it a cluster (for tests and demos).
//
// Guarantees:
//   - Engage never blocks: it records the wish and returns. The Set
//     connects in the background, at most Options.MaxEngaging clusters at
//     once, and retries a failing cluster with a backoff of its own (1 s
//     doubling to 5 minutes), so one unreachable cluster holds up no other.
//   - Ordered: listeners (Set.Subscribe) hear Engaged and Disengaged of one
//     engagement once each and in that order; a re-engagement (a new
//     Target.Version under the same name) disengages the old connection
//     before engaging the new one.
//   - Fenced: once a cluster is disengaged, every write through its
//     client fails with an error wrapping ErrDisengaged, its cache stops,
//     and the context its reconciles run on (From) is cancelled.
//   - Closed: a cluster whose API server is not the manager's has a
//     transport of its own, whose connections are all closed once its
//     cache has stopped; one that reaches the manager's API server shares
//     the manager's connection, and its idle ones are closed then.
//
// A reconcile finds the cluster of its request with From(ctx), and writes
// through From(ctx).Client(). See the Example.
package cluster
