// Package e2e_test runs converge end to end: real managers, controllers and
// declarative reconcilers against a real control plane started by
// framework/envtest, and the examples (podlogger, staticsite, fleet) and small test
// programs (testdata/slowctl, testdata/secretctl) as processes, as users run
// them.
//
// Layout: this file starts the one control plane the suite shares (etcd,
// kube-apiserver and kube-controller-manager, whose garbage collector the
// declarative specs rely on, with the StaticSite CRD of examples/staticsite
// installed) and builds the programs the process-level specs run;
// helpers_test.go holds the helpers every spec uses; each other file holds the
// specs of one concern. Every spec works in a namespace of its own and builds
// and stops its own Manager, so specs never see each other's objects or
// controllers.
//
// Run it with
//
//	go test -race -count=1 ./test/e2e/ -ginkgo.v
//
// The control-plane binaries are found as framework/envtest documents (make assets
// builds them).
package e2e_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	// What a spec waits for (a reconcile, a cache sync) takes milliseconds;
	// 10 s leaves room for a loaded machine and the race detector. Specs that
	// wait on purpose (backoffs, leases, CRDs) say so with WithTimeout. The
	// default also bounds Eventually and Consistently given the spec's
	// context, so a failing spec fails in seconds, not at its SpecTimeout.
	SetDefaultEventuallyTimeout(10 * time.Second)
	EnforceDefaultTimeoutsWhenUsingContexts()
	RunSpecs(t, "converge e2e")
}

// The suite's control plane, admin clients and programs, set once by
// BeforeSuite and read-only afterwards. Specs must not change them: a spec
// that needs another configuration copies cfg (rest.CopyConfig).
var (
	env  *envtest.Environment
	cfg  *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// bins are the example and test programs, built with -race in the
	// background while the control plane starts (see programs.path).
	bins *programs
)

// staticSiteCRDs is the folder of the StaticSite CRD, installed at start.
const staticSiteCRDs = "../../examples/staticsite/config/crd"

var _ = BeforeSuite(func(ctx SpecContext) {
	// Each Ginkgo process (ginkgo -p) starts a control plane of its own: envtest
	// Environments are isolated (own folder, own ports), so processes share nothing.
	// Linking the programs takes seconds of CPU each: do it while etcd and
	// kube-apiserver start, which mostly wait.
	bins = buildPrograms(ctx,
		"github.com/converge-dev/converge/examples/podlogger",
		"github.com/converge-dev/converge/examples/podphases",
		"github.com/converge-dev/converge/examples/staticsite",
		"github.com/converge-dev/converge/examples/fleet",
		"./testdata/slowctl",
		"./testdata/secretctl",
		"github.com/converge-dev/converge/cmd/converge",
	)

	// kube-controller-manager adds about a second to the start (measured:
	// 5.4 s against 4.4 s on 2 cores), less than a second control plane
	// would cost the specs that need garbage collection.
	env = envtest.New(envtest.Options{
		ControllerManager: true,
		CRDs:              envtest.CRDOptions{Paths: []string{staticSiteCRDs}},
	})
	DeferCleanup(env.Stop) // at the end of the suite; fails the suite if Stop fails

	start := time.Now()
	var err error
	cfg, err = env.Start(ctx)
	Expect(err).NotTo(HaveOccurred(), "start the control plane")
	GinkgoWriter.Printf("control plane ready in %v at %s\n", time.Since(start).Round(time.Millisecond), env.APIServerURL())

	kube, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	dyn, err = dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(2*time.Minute))
