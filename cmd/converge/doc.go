// Command converge scaffolds controller projects built on the converge
// framework, and adds controllers, APIs and webhooks to them; converge
// explain asks a running manager why an object is or is not converged.
//
//	converge init --module example.com/team/op [--dir DIR]
//	converge create api --group shop --version v1alpha1 --kind Order
//	converge create controller --group apps --version v1 --kind Deployment
//	converge create webhook --group shop --version v1alpha1 --kind Order --defaulting --validation
//	make test
//	make run                                  # in a second terminal:
//	converge explain Order default/order-sample # asks make run's manager (bin/metrics-url)
//	converge explain Deployment shop/web --url https://localhost:8443 --token "$TOKEN" --insecure-skip-tls-verify
//	converge explain ConfigMap default/policy --cluster edge-1 # the object in an engaged cluster (package cluster)
//
// Install it with
//
//	go install github.com/converge-dev/converge/cmd/converge@latest
//
// # What it guarantees
//
//   - Builds and passes: a generated project builds, vets and passes its own
//     tests (Ginkgo specs on a real control plane) before you change a line.
//   - Least privilege, tested: each controller declares its permissions with
//     +kubebuilder:rbac markers; make manifests turns them into
//     config/rbac/role.yaml, and the generated specs run the controllers
//     with exactly that role, so a missing permission fails a test.
//   - Your changes are kept: .converge/scaffold.json records a hash of every
//     file converge wrote. Re-running a command rewrites only files nobody
//     changed since; a changed file is kept and reported unless --force.
//     Running the same command twice changes nothing.
//   - Names are checked before anything is written, and every rejection says
//     what is allowed; a mistyped command or flag gets the one meant.
//   - Runs without a cluster: the project's make run starts an embedded
//     control plane (etcd and kube-apiserver) when no kubeconfig is found,
//     installs the CRDs, serves the debug page on loopback and prints its
//     URL, and stops it all when Ctrl-C ends the manager (exit 0).
//   - Green CI from the first push: the project's make lint, make test and
//     make test-e2e (the generated CI workflow's steps) pass on the project
//     of init alone and after each create command.
//   - Repairable: init checks that the go command can download the
//     framework version before it writes anything; re-run with
//     --converge-replace or --converge-version, it rewrites go.mod.
//
// # The framework version
//
// go.mod requires github.com/converge-dev/converge at, in order:
// --converge-replace PATH (or $CONVERGE_REPLACE), which adds a replace
// directive to a local checkout; --converge-version; the version this
// converge binary was built from (go install ...@v0.4.0 records it, and so
// does a build inside a git checkout: a pseudo-version v0.0.0-<time>-<commit>);
// otherwise the latest release, resolved by go get.
package main
