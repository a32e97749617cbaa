package explore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/reconcile"
)

// The test control plane, started by the first test that needs it and
// stopped by TestMain. kube-apiserver runs without its watch cache, so
// that a compaction expires watches at once (the Expire fault).
var (
	envOnce sync.Once
	env     *envtest.Environment
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

func testEnv(t *testing.T) *envtest.Environment {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a test control plane")
	}
	envOnce.Do(func() {
		env = envtest.New(envtest.Options{
			APIServerFlags: []string{"--watch-cache=false"},
			CRDs:           envtest.CRDOptions{Objects: []runtime.Object{api.CRD()}},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var cfg *rest.Config
		if cfg, envErr = env.Start(ctx); envErr != nil {
			return
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		for _, ns := range []string{"ns", "db", "external"} {
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				envErr = err
				return
			}
		}
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

// mirrorOrClean keeps a Secret "<name>-mirror" per ConfigMap of namespace
// ns and deletes it once the ConfigMap is gone; with swallow, it logs a
// failed create and reports success (nothing retries it). It leaves the
// ConfigMaps of kube-system alone, so that its first write is the
// scenario's first ConfigMap's mirror.
func mirrorOrClean(swallow bool) func(*framework.Manager) error {
	return func(mgr *framework.Manager) error {
		c := mgr.Client()
		return framework.NewBuilder[*corev1.ConfigMap](mgr, "mirror", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				if req.Namespace != "ns" {
					return reconcile.Result{}, nil
				}
				mirror := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-mirror"}}
				err := c.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, &corev1.ConfigMap{})
				switch {
				case apierrors.IsNotFound(err):
					if err := c.Delete(ctx, mirror); err != nil && !apierrors.IsNotFound(err) {
						return reconcile.Result{}, err
					}
					return reconcile.Result{}, nil
				case err != nil:
					return reconcile.Result{}, err
				}
				if err := c.Create(ctx, mirror); err != nil && !apierrors.IsAlreadyExists(err) && !swallow {
					return reconcile.Result{}, err
				}
				return reconcile.Result{}, nil
			}))
	}
}

// wroteForEach: the controllers wrote (or tried to) the mirror of every
// ConfigMap the scenario created, whether or not it still exists.
var wroteForEach = explore.Invariant{Name: "the controllers acted on every ConfigMap created", Check: func(_ context.Context, s *explore.Snapshot) error {
	acted := map[string]bool{}
	for _, w := range s.Writes() {
		if w.Manager != "" {
			acted[w.Name] = true
		}
	}
	for _, w := range s.Writes() {
		if w.Manager == "" && w.Verb == "create" && w.Kind.Kind == "ConfigMap" && !acted[w.Name+"-mirror"] {
			return fmt.Errorf("nothing written for ConfigMap %s/%s", w.Namespace, w.Name)
		}
	}
	return nil
}}

// mirroredBeforeNext: a's mirror is created before the scenario creates
// b (the controllers converge after each step, so only a write held back
// lands after the next step).
var mirroredBeforeNext = explore.Invariant{Name: "a's mirror is created before b", Check: func(_ context.Context, s *explore.Snapshot) error {
	for _, w := range s.Writes() {
		switch {
		case w.Manager != "" && w.Verb == "create" && w.Name == "a-mirror" && w.Committed():
			return nil
		case w.Manager == "" && w.Verb == "create" && w.Name == "b":
			return fmt.Errorf("ConfigMap b was created before a's mirror (writes: %v)", s.Writes())
		}
	}
	return nil
}}

func createThenDelete(name string) explore.Step {
	return explore.Step{Name: "create and delete ConfigMap " + name, Do: func(ctx context.Context, c *client.Client) error {
		cm := configMap(name)
		if err := c.Create(ctx, cm); err != nil {
			return err
		}
		return c.Delete(ctx, cm)
	}}
}

// Each fault of the real plane really happens: injected on a trigger
// where it can break a property that only it can break, it fires and
// breaks it (a replay token pins it there, instead of a search of seeds
// and its shrinking); schedules drawing the plane's other faults do not
// break it (the negative control).
func TestEachRealPlaneFaultBreaksWhatOnlyItCanBreak(t *testing.T) {
	e := testEnv(t)
	others := func(k explore.FaultKind) []explore.FaultKind {
		var out []explore.FaultKind
		for _, o := range []explore.FaultKind{explore.Crash, explore.Restart, explore.Expire, explore.Hold} {
			if o != k {
				out = append(out, o)
			}
		}
		return out
	}
	restartOpts := explore.Options{Setup: mirrorOrClean(true),
		Steps:     []explore.Step{explore.Create(configMap("a")), explore.Create(configMap("b"))},
		Converged: []explore.Invariant{eachHasMirror}}
	for _, tc := range []struct {
		name  string
		fault string // a replay token
		kind  explore.FaultKind
		hit   string // what the fault's write became, if it has one
		opts  explore.Options
		late  bool // the restarted write is answered once kube-apiserver is up again
	}{
		// A create that fails unanswered is swallowed: only a dead
		// kube-apiserver fails it (409 and 500 are not drawn here).
		// Write 1 is a's mirror; it gets no answer and takes no effect,
		// even when this process runs it late, when a connection dialled
		// then would reach the restarted kube-apiserver.
		{name: "restart", fault: "restart@w1", kind: explore.Restart, hit: "create v1 Secret ns/a-mirror → 0", opts: restartOpts},
		{name: "restart, answered late", fault: "restart@w1", kind: explore.Restart, hit: "create v1 Secret ns/a-mirror → 0", opts: restartOpts, late: true},
		// A ConfigMap created and deleted within one step is seen only
		// through its events, which an expired watch loses.
		{name: "expire", fault: "expire@s1", kind: explore.Expire, opts: explore.Options{Setup: mirrorOrClean(false),
			Steps:     []explore.Step{explore.Create(configMap("a")), createThenDelete("tmp")},
			Converged: []explore.Invariant{wroteForEach}}},
		// Only a held write lands after the next step: a's mirror
		// (write 1).
		{name: "hold", fault: "hold@w1", kind: explore.Hold, hit: "create v1 Secret ns/a-mirror → 201", opts: explore.Options{Setup: mirrorOrClean(false),
			Steps:      []explore.Step{explore.Create(configMap("a")), explore.Create(configMap("b"))},
			Invariants: []explore.Invariant{mirroredBeforeNext}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Envtest = e
			want := append(tc.opts.Invariants, tc.opts.Converged...)[0].Name
			if tc.late {
				t.Cleanup(explore.SendRestartedWriteLate())
			}
			f, injected, err := explore.CheckFaults(t.Context(), opts, tc.fault)
			if err != nil {
				t.Fatal(err)
			}
			// The fault fired first, or nothing could break.
			if len(injected) != 1 || injected[tc.kind] != 1 {
				t.Fatalf("with %s: injected %v, want one %v", tc.fault, injected, tc.kind)
			}
			if f == nil || f.Broken != want {
				t.Fatalf("with %s: got %v, want %q broken", tc.fault, f, want)
			}
			if !strings.Contains(f.Hit[1], tc.hit) {
				t.Errorf("with %s: the fault hit %q, want %q", tc.fault, f.Hit[1], tc.hit)
			}
			t.Logf("caught:\n%s", f)
			if tc.late {
				return // the negative control is the first case's
			}

			without := opts
			without.Schedules = 4
			without.Faults.Kinds = others(f.Plan[0].Kind)
			// The other faults may break something else (a Restart that
			// lost a delete lets this toy controller delete a mirror it
			// made again twice, which the delete-count oracle reports), but
			// never what only this fault breaks.
			other, err := explore.Check(t.Context(), without)
			if err != nil || other != nil && other.Broken == want {
				t.Fatalf("with %v faults: got %v, %v; want %q not broken", without.Faults.Kinds, other, err, want)
			}
			if other != nil {
				t.Logf("with %v faults, something else broke:\n%s", without.Faults.Kinds, other)
			}
		})
	}
}

// A reconcile that ignores its context (it retries its read with
// context.Background until kube-apiserver answers) spins through an API
// server restart, then converges: the explorer neither hangs nor raises
// a false alarm.
func TestAReconcileIgnoringItsContextThroughARestart(t *testing.T) {
	e := testEnv(t)
	setup := func(mgr *framework.Manager) error {
		c, api := mgr.Client(), mgr.APIReader()
		return framework.NewBuilder[*corev1.ConfigMap](mgr, "stubborn", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				bg := context.Background() // the context ignored
				var err error
				for {
					if err = api.Get(bg, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, &corev1.ConfigMap{}); err == nil || apierrors.IsNotFound(err) {
						break
					}
					time.Sleep(10 * time.Millisecond) // the reconcile's own retry, not the test's
				}
				if err != nil {
					return reconcile.Result{}, nil
				}
				mirror := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-mirror"}}
				if err := c.Create(bg, mirror); err != nil && !apierrors.IsAlreadyExists(err) {
					return reconcile.Result{}, err
				}
				return reconcile.Result{}, nil
			}))
	}
	f, err := explore.Check(t.Context(), explore.Options{
		Envtest: e, Setup: setup, Schedules: 4,
		Steps:     []explore.Step{explore.Create(configMap("a")), explore.Create(configMap("b"))},
		Converged: []explore.Invariant{eachHasMirror},
		Faults:    explore.FaultOptions{Kinds: []explore.FaultKind{explore.Restart}},
	})
	if err != nil || f != nil {
		t.Fatalf("got %v, %v; want nothing broken", f, err)
	}
}

// A schedule that does not converge after a restart says when
// kube-apiserver was killed and when it was ready again, beside what kept
// the controllers busy: here a controller that gives up for good once a
// write of it is lost with its connection (the Restart fault's write
// fails with a reset connection).
func TestNotConvergedAfterARestartSaysWhen(t *testing.T) {
	e := testEnv(t)
	setup := func(mgr *framework.Manager) error {
		c := mgr.Client()
		var lost atomic.Bool // this manager's
		return framework.NewBuilder[*corev1.ConfigMap](mgr, "fragile", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				if req.Namespace != "ns" {
					return reconcile.Result{}, nil
				}
				if lost.Load() {
					return reconcile.Result{}, errors.New("gave up after a lost write")
				}
				mirror := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-mirror"}}
				err := c.Create(ctx, mirror)
				if utilnet.IsConnectionReset(err) {
					lost.Store(true)
				}
				if err != nil && !apierrors.IsAlreadyExists(err) {
					return reconcile.Result{}, err
				}
				return reconcile.Result{}, nil
			}))
	}
	opts := explore.Options{Envtest: e, Setup: setup, ConvergeTimeout: 10 * time.Second,
		Steps: []explore.Step{explore.Create(configMap("a"))}}
	f, injected, err := explore.CheckFaults(t.Context(), opts, "restart@w1")
	if err != nil {
		t.Fatal(err)
	}
	if injected[explore.Restart] != 1 {
		t.Fatalf("injected %v, want one Restart", injected)
	}
	if f == nil || f.Broken != "convergence" {
		t.Fatalf("got %v, want convergence broken", f)
	}
	for _, want := range []string{"gave up after a lost write", "kube-apiserver, killed by a Restart fault ", " ago, was ready again "} {
		if !strings.Contains(f.Err.Error(), want) {
			t.Errorf("the report lacks %q:\n%s", want, f)
		}
	}
	t.Logf("reported:\n%s", f)
}

// Options.Envtest must be started; it takes the real plane's faults only,
// one schedule at a time.
func TestEnvtestOptionsAreChecked(t *testing.T) {
	opts := explore.Options{
		Envtest: envtest.New(envtest.Options{}), Setup: mirrorOrClean(false), Parallel: 2,
		Steps:  []explore.Step{explore.Create(configMap("a"))},
		Faults: explore.FaultOptions{Kinds: []explore.FaultKind{explore.Lag}},
	}
	_, err := explore.Check(t.Context(), opts)
	for _, want := range []string{"Options.Envtest is not started", "Options.Parallel is 2", "Options.Faults.Kinds[0] is Lag, which framework/fake only can inject"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to say %q", err, want)
		}
	}
}
