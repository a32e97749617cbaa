// Package layering checks that converge's packages import one way:
// reconcile, object, lease and sharding (leaves) → workqueue and informers (siblings) →
// client → cluster → framework → declarative, that the test helpers stay out of the library, and that
// nothing depends on controller-runtime.
package layering

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/converge-dev/converge"

// stdOnly, as a forbidden import, forbids every package outside the
// standard library.
const stdOnly = "<non-standard>"

// rules are the import rules. A package pattern is relative to the module
// ("framework", "examples/...", or "..." for every package of the module); a
// forbidden import is a full import path, or a pattern ending in "/...",
// which also matches every package below it. Rules are checked on the
// packages' non-test dependencies, direct or not: test code may import
// anything (bench/ is a module of its own and is not checked).
var rules = []struct {
	name      string
	from      []string
	forbidden []string
}{
	{
		name:      "reconcile is a leaf: the standard library only",
		from:      []string{"reconcile"},
		forbidden: []string{stdOnly},
	},
	{
		name:      "object is a leaf below every layer: it imports no converge package",
		from:      []string{"object"},
		forbidden: []string{module + "/..."},
	},
	{
		name:      "lease is a leaf: the standard library only",
		from:      []string{"lease"},
		forbidden: []string{stdOnly},
	},
	{
		name:      "sharding is a leaf below informers, client and framework, which share its names: of converge it imports only lease",
		from:      []string{"sharding"},
		forbidden: []string{module + "/object", module + "/reconcile", module + "/workqueue", module + "/informers", module + "/client", module + "/framework/...", module + "/declarative", module + "/internal/..."},
	},
	{
		name:      "workqueue never imports informers, its sibling, or the layers above",
		from:      []string{"workqueue"},
		forbidden: []string{module + "/informers", module + "/client", module + "/framework/...", module + "/declarative"},
	},
	{
		name:      "informers never imports workqueue, its sibling, or the layers above",
		from:      []string{"informers"},
		forbidden: []string{module + "/workqueue", module + "/client", module + "/framework/...", module + "/declarative"},
	},
	{
		name:      "client never imports framework or declarative above it: the manager decides when writes are refused, the client only asks",
		from:      []string{"client"},
		forbidden: []string{module + "/framework/...", module + "/declarative"},
	},
	{
		name:      "cluster sits between client and framework: the clusters a manager talks to are built of informers and client, never of workqueue, the manager, declarative or the test helpers",
		from:      []string{"cluster/..."},
		forbidden: []string{module + "/workqueue", module + "/framework/...", module + "/declarative", module + "/internal/testenv", module + "/internal/testapi"},
	},
	{
		name:      "the layers below cluster never import it: workqueue, informers and client know nothing of many clusters",
		from:      []string{"workqueue", "informers", "client", "object", "sharding", "lease", "internal/hooks", "internal/restset"},
		forbidden: []string{module + "/cluster/..."},
	},
	{
		name:      "framework never imports the test control plane, the examples, or declarative above it",
		from:      []string{"framework", "framework/controllerutil"},
		forbidden: []string{module + "/framework/envtest", module + "/examples/...", module + "/declarative"},
	},
	{
		name:      "framework/fake serves the client, cache and manager from below: it may import client, informers and object, never the manager, declarative or the test control plane",
		from:      []string{"framework/fake"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/declarative", module + "/workqueue", module + "/reconcile"},
	},
	{
		name:      "the library never imports the fake API server: it is for tests",
		from:      []string{"client", "informers", "object", "reconcile", "workqueue", "cluster/...", "framework", "framework/controllerutil", "framework/envtest", "framework/introspect", "declarative"},
		forbidden: []string{module + "/framework/fake"},
	},
	{
		name:      "framework/explore is a test helper on top of framework and framework/fake: the library, the fake and the test control plane never import it",
		from:      []string{"client", "informers", "object", "reconcile", "workqueue", "framework", "framework/controllerutil", "framework/envtest", "framework/introspect", "framework/fake", "framework/webhook", "declarative"},
		forbidden: []string{module + "/framework/explore/..."},
	},
	{
		name:      "framework/explore runs controllers in process, on the fake API server or a test control plane it is given: it never imports declarative or the test helpers",
		from:      []string{"framework/explore"},
		forbidden: []string{module + "/declarative", module + "/internal/testenv"},
	},
	{
		name:      "framework/internal/seam is framework's one opening for framework/explore, below framework: it never imports the manager, the client, the fake or declarative",
		from:      []string{"framework/internal/seam"},
		forbidden: []string{module + "/framework", module + "/framework/fake", module + "/client", module + "/declarative"},
	},
	{
		name:      "framework/internal/seam is for framework (which sets it) and framework/explore (which reads it): the packages below framework never import it",
		from:      []string{"framework/fake", "framework/introspect", "framework/webhook", "framework/envtest", "framework/internal/ring", "framework/internal/serving"},
		forbidden: []string{module + "/framework/internal/seam"},
	},
	{
		name:      "framework/introspect is the debug endpoint below framework, which serves it through introspect.Provider: it never imports the manager, the client, declarative or the test control plane",
		from:      []string{"framework/introspect"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/framework/webhook", module + "/client", module + "/declarative"},
	},
	{
		name:      "framework/envtest stands alone: it never imports framework",
		from:      []string{"framework/envtest"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil"},
	},
	{
		name:      "framework/internal/serving is plumbing below framework: it imports no converge layer",
		from:      []string{"framework/internal/serving"},
		forbidden: []string{module + "/framework", module + "/declarative", module + "/informers", module + "/workqueue", module + "/reconcile"},
	},
	{
		name:      "framework/internal/runner, the manager's groups of runnables, is a leaf below framework: it imports no converge package",
		from:      []string{"framework/internal/runner"},
		forbidden: []string{module + "/..."},
	},
	{
		name:      "framework/internal/ring, the Lease ring, sits below framework: of converge it imports only sharding, lease, framework/internal/syncgc and framework/internal/fence; the controllers it drives are ring.Users",
		from:      []string{"framework/internal/ring"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/declarative", module + "/client", module + "/informers", module + "/workqueue", module + "/reconcile", module + "/object", module + "/internal/..."},
	},
	{
		name:      "framework/internal/shard, a sharded controller's reads per bucket, sits below framework beside the ring it is driven by: it never imports the manager, its webhooks, declarative, the fake API server or the test control plane; framework binds its sources through shard.Source",
		from:      []string{"framework/internal/shard"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/framework/fake", module + "/framework/webhook", module + "/declarative"},
	},
	{
		name:      "only framework binds a sharded controller's reads: no package beside or below it imports framework/internal/shard",
		from:      []string{"framework/controllerutil", "framework/webhook", "framework/fake", "framework/envtest", "framework/introspect", "framework/internal/ring", "framework/internal/serving", "framework/internal/syncgc"},
		forbidden: []string{module + "/framework/internal/shard"},
	},
	{
		name:      "only framework drives the Lease ring: no package beside or below it imports framework/internal/ring",
		from:      []string{"framework/controllerutil", "framework/webhook", "framework/fake", "framework/envtest", "framework/internal/serving", "framework/internal/syncgc", "client", "informers", "workqueue", "sharding", "lease"},
		forbidden: []string{module + "/framework/internal/ring"},
	},
	{
		name:      "framework/internal/fence, the time check of a Lease's holder that the ring and the leader election share, is a leaf below them: it imports no converge package",
		from:      []string{"framework/internal/fence"},
		forbidden: []string{module + "/..."},
	},
	{
		name:      "framework/internal/syncgc is a leaf: the standard library only",
		from:      []string{"framework/internal/syncgc"},
		forbidden: []string{stdOnly},
	},
	{
		name:      "framework/internal/history, a controller's reconcile history, sits below framework: of converge it imports only reconcile and framework/introspect (whose Blocker a record keeps)",
		from:      []string{"framework/internal/history"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/framework/webhook", module + "/framework/internal/...", module + "/client", module + "/declarative", module + "/internal/klogcap", module + "/internal/errtext"},
	},
	{
		name:      "framework/internal/reconcilelog, a reconcile's log sink and the call that recovers its panics, sits below framework: of converge it imports only reconcile, framework/introspect, internal/klogcap and internal/errtext",
		from:      []string{"framework/internal/reconcilelog"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/framework/webhook", module + "/framework/internal/...", module + "/client", module + "/declarative"},
	},
	{
		name:      "framework/internal/recorder, Event recording, sits below framework: of framework's rooms it imports only framework/internal/reconcilelog, and never the manager, the client or declarative",
		from:      []string{"framework/internal/recorder"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/framework/webhook", module + "/framework/internal/history", module + "/framework/internal/served", module + "/framework/internal/ring", module + "/framework/internal/serving", module + "/framework/internal/syncgc", module + "/client", module + "/declarative"},
	},
	{
		name:      "framework/internal/served, watching a kind while the API server serves it, sits below framework: of converge it imports only reconcile (the source it watches is handed in as functions)",
		from:      []string{"framework/internal/served"},
		forbidden: []string{module + "/framework/...", module + "/client", module + "/informers", module + "/workqueue", module + "/object", module + "/sharding", module + "/lease", module + "/declarative", module + "/internal/..."},
	},
	{
		name:      "framework's rooms for history, reconcile logs, events and served kinds are framework's alone: no package beside or below it imports them",
		from:      []string{"framework/controllerutil", "framework/webhook", "framework/fake", "framework/envtest", "framework/introspect", "framework/internal/serving", "framework/internal/syncgc", "framework/internal/ring"},
		forbidden: []string{module + "/framework/internal/history", module + "/framework/internal/reconcilelog", module + "/framework/internal/recorder", module + "/framework/internal/served"},
	},
	{
		name:      "framework/internal/metrics, the series a manager exports, sits below framework: of converge it imports only informers (whose stats and unwatched reads it counts) and reconcile, never the manager, its other rooms, the client, workqueue or declarative",
		from:      []string{"framework/internal/metrics"},
		forbidden: []string{module + "/framework/...", module + "/client", module + "/workqueue", module + "/declarative", module + "/internal/errtext", module + "/internal/klogcap"},
	},
	{
		name:      "only framework exports a manager's series: no package beside or below it imports framework/internal/metrics",
		from:      []string{"framework/controllerutil", "framework/webhook", "framework/fake", "framework/envtest", "framework/introspect", "framework/internal/history", "framework/internal/reconcilelog", "framework/internal/recorder", "framework/internal/served", "framework/internal/ring", "framework/internal/serving", "framework/internal/shard", "framework/internal/syncgc", "informers", "workqueue", "client"},
		forbidden: []string{module + "/framework/internal/metrics"},
	},
	{
		name:      "framework/internal/binding, a controller's sources bound to each engaged cluster, sits below framework: of converge it imports cluster and what cluster imports, never the manager, its other rooms, workqueue or declarative; framework binds its sources through binding.Source",
		from:      []string{"framework/internal/binding"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/framework/fake", module + "/framework/webhook", module + "/framework/introspect", module + "/framework/internal/metrics", module + "/framework/internal/shard", module + "/framework/internal/ring", module + "/framework/internal/adapter", module + "/workqueue", module + "/declarative"},
	},
	{
		name:      "framework/internal/adapter, an ObjectReconciler as a Reconciler, sits below framework: of converge it imports only informers (whose readers it is handed), object and reconcile",
		from:      []string{"framework/internal/adapter"},
		forbidden: []string{module + "/framework/...", module + "/client", module + "/cluster", module + "/workqueue", module + "/declarative", module + "/internal/errtext", module + "/internal/klogcap"},
	},
	{
		name:      "only framework binds clusters and adapts object reconcilers: no package beside or below it imports framework/internal/binding or framework/internal/adapter",
		from:      []string{"framework/controllerutil", "framework/webhook", "framework/fake", "framework/envtest", "framework/introspect", "framework/internal/history", "framework/internal/reconcilelog", "framework/internal/recorder", "framework/internal/served", "framework/internal/ring", "framework/internal/serving", "framework/internal/shard", "framework/internal/syncgc", "framework/internal/metrics", "cluster/...", "informers", "workqueue", "client"},
		forbidden: []string{module + "/framework/internal/binding", module + "/framework/internal/adapter"},
	},
	{
		name:      "framework/webhook holds handlers only: it may import object and framework/internal/serving, never the manager, the client, declarative or the test control plane",
		from:      []string{"framework/webhook"},
		forbidden: []string{module + "/framework", module + "/framework/controllerutil", module + "/framework/envtest", module + "/client", module + "/declarative", module + "/informers", module + "/workqueue", module + "/reconcile"},
	},
	{
		name:      "internal/testapi is for tests only",
		from:      []string{"..."},
		forbidden: []string{module + "/internal/testapi"},
	},
	{
		name:      "internal/restset is plumbing below informers, client and framework, which share it (the framework puts a sharded reconcile's write fence in its context with it): it imports no converge package",
		from:      []string{"internal/restset"},
		forbidden: []string{module + "/..."},
	},
	{
		name:      "internal/hooks is below informers and workqueue, which set its hooks, and framework and declarative, which call them: of converge it imports only the leaves object, reconcile and sharding",
		from:      []string{"internal/hooks"},
		forbidden: []string{module + "/workqueue", module + "/informers", module + "/client", module + "/framework/...", module + "/declarative", module + "/internal/restset"},
	},
	{
		name:      "internal/typednil is a leaf: the standard library only",
		from:      []string{"internal/typednil"},
		forbidden: []string{stdOnly},
	},
	{
		name:      "internal/memsize, the heap estimate of cached objects, is a leaf: the standard library only",
		from:      []string{"internal/memsize"},
		forbidden: []string{stdOnly},
	},
	{
		name:      "internal/shardtest is a leaf: the standard library only",
		from:      []string{"internal/shardtest"},
		forbidden: []string{stdOnly},
	},
	{
		name:      "internal/errtext is a leaf below framework and declarative, which show errors through it: it imports no converge package",
		from:      []string{"internal/errtext"},
		forbidden: []string{module + "/..."},
	},
	{
		name:      "internal/klogcap is a leaf: it imports no converge package",
		from:      []string{"internal/klogcap"},
		forbidden: []string{module + "/..."},
	},
	{
		name:      "declarative never imports the test control plane",
		from:      []string{"declarative"},
		forbidden: []string{module + "/framework/envtest"},
	},
	{
		name:      "converge is not built on controller-runtime (only bench/, its own module, compares with it)",
		from:      []string{"..."},
		forbidden: []string{"sigs.k8s.io/controller-runtime/..."},
	},
	{
		name:      "internal/testenv is for tests only: no non-_test.go file imports it (it imports framework, the one upward import)",
		from:      []string{"..."},
		forbidden: []string{module + "/internal/testenv"},
	},
}

// pkg is one package as go list reports it.
type pkg struct {
	ImportPath string
	Deps       []string
	Error      *struct{ Err string } // set when the package cannot be built
}

// listModule returns every package of the module with its non-test
// dependencies, by path relative to the module ("" for its root). A package
// that cannot be built (an import cycle, say) is an error, and its
// dependencies are still checked: go list -e reports them.
func listModule(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-json=ImportPath,Deps,Error", module+"/...").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list %s/...: %v: %s", module, err, exit.Stderr)
		}
		t.Fatalf("go list %s/...: %v", module, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	pkgs := map[string][]string{}
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[relative(p.ImportPath)] = p.Deps
	}
	return pkgs
}

// message is the report of package rel importing dep against rule.
func message(rel, dep, rule string) string {
	return fmt.Sprintf("package %s imports %s (directly or not); rule: %s", strings.TrimSuffix(module+"/"+rel, "/"), dep, rule)
}

func relative(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

// matches reports whether path matches pattern: equal, or below it for a
// pattern ending in "/...", or anything for "...".
func matches(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}
	return path == pattern
}

// forbids reports whether the forbidden pattern f matches the import dep.
func forbids(f, dep string) bool {
	if f == stdOnly {
		// Standard packages have no dot in their first path element.
		first, _, _ := strings.Cut(dep, "/")
		return strings.Contains(first, ".")
	}
	return matches(f, dep)
}

// violations returns one message per package, dependency and rule broken,
// sorted.
func violations(pkgs map[string][]string) []string {
	var out []string
	for _, r := range rules {
		for rel, deps := range pkgs {
			if !slices.ContainsFunc(r.from, func(p string) bool { return matches(p, rel) }) {
				continue
			}
			for _, dep := range deps {
				for _, f := range r.forbidden {
					if forbids(f, dep) {
						out = append(out, message(rel, dep, r.name))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestImportsFollowTheRules(t *testing.T) {
	pkgs := listModule(t)
	// A rule on a package go list does not report would pass for nothing.
	for _, r := range rules {
		for _, from := range r.from {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(pkgs)), func(rel string) bool { return matches(from, rel) }) {
				t.Errorf("rule %q names package %s, which go list does not report: the rule checks nothing", r.name, from)
			}
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestEveryRuleCanFail gives each rule a package graph that breaks it, and
// checks the violation names the package, the forbidden import and the rule.
func TestEveryRuleCanFail(t *testing.T) {
	for _, r := range rules {
		for _, from := range r.from {
			for _, f := range r.forbidden {
				rel := strings.TrimSuffix(from, "/...")
				if from == "..." {
					rel = "framework"
				}
				dep := strings.TrimSuffix(f, "/...")
				if f == stdOnly {
					dep = "k8s.io/client-go/rest"
				}
				got := violations(map[string][]string{rel: {"context", dep}})
				want := message(rel, dep, r.name)
				if !slices.Contains(got, want) {
					t.Errorf("%s importing %s: violations %q, want one %q", rel, dep, got, want)
				}
			}
		}
	}
	// And the standard library is always allowed.
	if got := violations(map[string][]string{"reconcile": {"context", "errors", "time"}}); len(got) != 0 {
		t.Errorf("reconcile importing the standard library only: violations %q, want none", got)
	}
}
