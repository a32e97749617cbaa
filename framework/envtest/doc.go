// Package envtest runs a real Kubernetes control plane (etcd and kube-apiserver, and on
// request kube-controller-manager) on the loopback interface, for tests and for an embedded
// demo mode.
//
// An [Environment] is built by [New] from [Options], whose zero value is a usable
// configuration, and comes to life with [Environment.Start], which returns an admin
// *rest.Config. [Environment.Stop] ends it. See the Example for the whole shape.
//
// # Guarantees
//
//   - Isolated: each Environment has its own temporary folder ([Environment.Dir]: etcd data,
//     certificates, logs and the admin kubeconfig) and its own free loopback ports, so
//     several Environments run at once in one process and in parallel processes.
//   - Ready: Start returns once kube-apiserver's /readyz answers 200 to the admin identity,
//     the default namespace exists, the RBAC bootstrap roles exist (cluster-admin), every
//     CRD of [Options.CRDs] is Established and discoverable, and, when asked,
//     kube-controller-manager is healthy.
//   - Secure: kube-apiserver serves TLS only, with certificates generated for the
//     Environment (ECDSA P-256) and RBAC authorization, so [Environment.AddUser] yields
//     identities that are really denied until a Role grants them access.
//   - Contained: no process outlives its Environment's Stop, nor (on Linux) the process
//     that started it, even when that process panics or is killed: every child gets
//     Pdeathsig SIGKILL from one dedicated, never-exiting OS thread, and runs in its own
//     process group, which Stop signals (SIGTERM, then SIGKILL after a grace period).
//   - Bounded: Start waits at most [Options.StartTimeout]; on failure its error carries the
//     tail of the failing process's log.
//
// # Binaries
//
// The binaries (etcd, kube-apiserver, and kube-controller-manager and kubectl when needed)
// are looked up by [FindBinary]: [Options.BinaryAssetsDirectory], $CONVERGE_ASSETS,
// $KUBEBUILDER_ASSETS, then the cache folder that the converge repository's `make assets`
// (hack/control-plane.sh) fills, ${XDG_CACHE_HOME:-$HOME/.cache}/converge/k8s/<version>.
// A missing binary is a [*MissingBinaryError] that names every place looked.
//
// # Fault injection
//
// [Environment.StopAPIServer], [Environment.StartAPIServer], [Environment.RestartAPIServer]
// and [Environment.KillAPIServer] take kube-apiserver down and up again on the same port
// with the same certificates and etcd data, so existing clients reconnect.
// [Environment.CompactEtcd] compacts etcd's history, which makes watches from older
// resource versions fail with 410 Gone (start kube-apiserver with --watch-cache=false to
// see it at once: the watch cache otherwise keeps recent history).
//
// # Webhooks
//
// [Environment.InstallWebhooks] installs mutating and validating webhook configurations
// (kubebuilder's config/webhook/manifests.yaml, or typed) and switches CRDs to webhook
// conversion, all pointed at https://127.0.0.1:<free port> with a CA it generates; it
// returns the address and a certificate folder for the webhook server
// (framework.Options.Webhook). kube-apiserver picks new configurations up asynchronously:
// [WebhookServing.Wait] polls a probe (a dry-run create the webhook refuses, say) until the
// webhooks answer. Those methods need a local control plane.
//
// # Existing clusters
//
// With [Options.UseExistingCluster] (or CONVERGE_USE_EXISTING_CLUSTER=true) Start starts
// nothing and uses the cluster of the current kubeconfig instead; [Environment.AddUser]
// then impersonates the user, and the fault injection methods return [ErrNotLocal].
// The fields that configure local processes (BinaryAssetsDirectory, ControllerManager,
// APIServerFlags, EtcdFlags, Output) are then refused by Start, naming each.
package envtest
