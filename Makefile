# converge: entry points. `make run` and `make test` work on a fresh machine
# with only Go installed; the first run builds the control-plane binaries once.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go

# Where hack/control-plane.sh puts etcd, kube-apiserver, kube-controller-manager
# and kubectl; framework/envtest looks in the same place.
ASSETS := $(shell hack/control-plane.sh --print-dir)

# Unit and integration packages; e2e suites run separately with Ginkgo's flags.
UNIT_PKGS = $$($(GO) list ./... | grep -v /test/e2e)

.PHONY: help assets browser run test test-unit test-e2e test-e2e-compact test-e2e-compact-quick test-scaffold fuzz chaos sharding explore bench bench-quick generate lint fmt

help: ## Show the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

assets: ## Build (once) etcd, kube-apiserver, kube-controller-manager and kubectl into the cache folder.
	@hack/control-plane.sh

browser: ## Install headless Chromium (Debian's package) once, for the debug page's browser test.
	@hack/chromium.sh

run: assets ## Run the podlogger example (an embedded control plane when no kubeconfig is found). ARGS=... passes flags.
	$(GO) build -o bin/podlogger ./examples/podlogger
	exec bin/podlogger $(ARGS)

test: ## Everything: lint, unit, integration, chaos and sharding tests with -race (fuzz seed corpora included), e2e suites (the graph and children-selection specs a second time with the cache compact); prints each stage's time.
	@hack/stages.sh lint assets test-unit test-e2e test-e2e-compact-quick

test-unit: ## Unit and integration tests, with the race detector.
	$(GO) test -race -count=1 -timeout 30m $(UNIT_PKGS)

test-e2e: assets browser ## End-to-end suites against a real control plane (the debug page's in headless Chromium).
	$(GO) test -race -count=1 -timeout 30m ./test/e2e/... -ginkgo.v=false

# The declarative e2e specs: the ones test-e2e-compact runs with every kind
# cached compact, and the quick share of them make test runs that way.
COMPACT_SPECS = -ginkgo.focus-file='declarative_test.go' -ginkgo.focus-file='ownership.*_test.go' -ginkgo.focus-file='graph_test.go' -ginkgo.focus-file='children_selection_test.go'
COMPACT_QUICK_SPECS = -ginkgo.focus-file='graph_test.go' -ginkgo.focus-file='children_selection_test.go'

test-e2e-compact: assets ## The declarative e2e specs (declarative, ownership, graph, children selection) with every kind the managers cache stored compact (CONVERGE_E2E_COMPACT=1).
	CONVERGE_E2E_COMPACT=1 $(GO) test -race -count=1 -timeout 30m ./test/e2e/ -ginkgo.v=false $(COMPACT_SPECS)

test-e2e-compact-quick: assets ## The graph and children-selection e2e specs with every kind cached compact; part of make test.
	CONVERGE_E2E_COMPACT=1 $(GO) test -race -count=1 -timeout 30m ./test/e2e/ -ginkgo.v=false $(COMPACT_QUICK_SPECS)

test-scaffold: assets ## A new user's whole path on a clean folder (init, create, the project's make test, make run with the debug page and converge explain, deploy, build-installer), and the project's CI steps after init and each create: several minutes. Not part of `make test`, which builds, lints and tests scaffolded projects too.
	CONVERGE_TEST_WHOLE_PATH=1 $(GO) test -race -count=1 -timeout 90m -run 'TestScaffoldWholePath|TestScaffoldCI' -v ./cmd/converge

fuzz: ## Fuzz every target for FUZZTIME each (default 3s). Not part of `make test`, whose test-unit replays the seed corpora.
	FUZZTIME=$${FUZZTIME:-3s} hack/fuzz.sh

chaos: assets ## Fault-injection suite at full size (apiserver kills, expired watches, half-open connections, panics, SIGTERM, late CRD/RBAC); prints a table.
	CHAOS_FULL=1 $(GO) test -count=1 -timeout 40m -v ./test/chaos/ 2>&1 | grep -E '^(--- |    [a-z_]+\.go:|[|]|ok|FAIL|PASS)'

sharding: assets ## Sharded controller in several processes at full size (3000 objects, with and without the ShardedListAndWatch gate): join, SIGTERM, SIGKILL, restart, SIGSTOP/SIGCONT and a kube-apiserver restart under updates, a table per plane; then two layouts started together (20 times), two programs on one ring name, a partition healed past the lease (and its negative control), a restart after a crash, and the steady-state cost of preconditions; then clusters spread over a ring (three start together, a join, SIGTERM, SIGKILL, SIGSTOP past the lease; 3 times), two provider configurations started together (5 times), and the negative control without a ring.
	SHARDING_FULL=1 $(GO) test -race -count=1 -timeout 30m -v ./test/sharding/

explore: ## The fault explorer's ported controller bugs at full size: each fixed version passes 1,000 schedules (make test runs 40), each buggy one is caught within the default 200; on a test control plane each fixed version passes 10 (make test runs 3). Not part of `make test`.
	EXPLORE_SCHEDULES=1000 $(GO) test -race -count=1 -timeout 60m ./framework/explore/internal/bugs/...

bench: assets ## converge vs controller-runtime vs client-go on one control plane (bench/README.md); BENCH_ARGS=... passes flags.
	cd bench && $(GO) run ./cmd/bench $(BENCH_ARGS)

bench-quick: assets ## The bench as a smoke test (--quick): every workload and contender at a hundredth of the size, about a minute. Not part of `make test`.
	cd bench && $(GO) run ./cmd/bench --quick $(BENCH_ARGS)

generate: ## Regenerate deepcopy code and CRD YAML of the examples (controller-gen).
	$(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=./examples/staticsite/api/... crd:crdVersions=v1 output:crd:dir=./examples/staticsite/config/crd
	$(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=./examples/webapp/api/... crd:crdVersions=v1 output:crd:dir=./examples/webapp/config/crd

lint: ## gofmt, go vet, go.mod/go.sum tidy in both modules, and no tracked binary or file over 1 MiB.
	@hack/check-tracked.sh
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@cd bench && { $(GO) mod tidy -diff || { echo "bench/go.mod/go.sum are not tidy: run go mod tidy in bench/"; exit 1; }; }

fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')
