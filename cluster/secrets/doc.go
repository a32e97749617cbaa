// Package secrets is a cluster provider that reads kubeconfigs from Secrets
// of the manager's own cluster: each Secret of one namespace that carries
// the selected labels names a cluster to engage (package cluster).
//
// Guarantees:
//   - A Secret added, or whose kubeconfig changed (a new hash), engages its
//     cluster (anew); a Secret deleted, or no longer selected, disengages it.
//   - A kubeconfig that does not parse, names no current cluster, or that
//     the Options refuse is reported in the Set's Health and logged once,
//     with the Secret and the field named; it is not retried until the
//     Secret changes.
//   - Refused unless allowed: kubeconfigs that read local files (tokenFile,
//     client certificate, key or CA files) and those that run commands
//     (exec) or call auth-provider plugins. Otherwise whoever may write a
//     Secret in the namespace could make the manager send its own
//     credentials anywhere, or run a program in its pod.
package secrets
