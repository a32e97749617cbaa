package explore

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// DefaultSchedules is the number of schedules Run and Check explore on
// framework/fake when Options.Schedules and -converge.schedules are zero;
// DefaultEnvtestSchedules on a test control plane (Options.Envtest),
// where a schedule runs in wall time, restarts included.
const (
	DefaultSchedules        = 200
	DefaultEnvtestSchedules = 10
)

// Options configures Run and Check.
type Options struct {
	// Setup adds the program's controllers to a manager: the function the
	// program's main calls. It is called once per manager: at the start of
	// each schedule, and again for the manager that replaces a crashed
	// one. Required.
	Setup func(*framework.Manager) error

	// Scheme holds every kind the controllers and the scenario use; the
	// fake API server serves them (see fake.Options.Scheme). Each manager
	// gets a copy of its known types (client-go's built-in types as
	// clientgoscheme registers them, the others with metav1's options
	// conversions; defaulting and conversion functions of custom types are
	// not copied), so a Setup that adds types to the manager's scheme
	// changes only its own copy. Zero means client-go's scheme of built-in
	// types.
	Scheme *runtime.Scheme

	// CRDs are the CustomResourceDefinitions of the custom resources of
	// Scheme, as fake.Options.CRDs. Zero means none.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// ClusterScoped lists, by an example object, the custom kinds of
	// Scheme that are not namespaced, as fake.Options.ClusterScoped. Zero
	// means every custom kind not in CRDs is namespaced.
	ClusterScoped []object.Object

	// Objects are stored before the first manager starts, as
	// fake.Options.Objects (on Options.Envtest: created, and deleted after
	// the schedule). Zero means none.
	Objects []object.Object

	// Envtest, when set, runs the schedules on this started test control
	// plane (kube-apiserver and etcd) instead of framework/fake: the
	// managers reach kube-apiserver through a TCP proxy of the explorer's
	// and every client's requests through a RoundTripper of its, the
	// schedules run one at a time, and after each the explorer deletes
	// what the scenario and the controllers created (finalizers removed;
	// Namespaces are left), so the namespaces the scenario uses must
	// exist. CRDs are installed with Environment.InstallCRDs; its faults
	// are Conflict, ServerError, Crash, Restart, Expire and Hold (see
	// FaultKind); Restart and Expire need envtest's local processes (not
	// envtest.Options.UseExistingCluster, where a Restart does not fire
	// and an Expire ends the exploration with envtest.ErrNotLocal). The
	// controllers run in wall time: a replay repeats a schedule's faults,
	// each on the same numbered write or step, not its interleaving. Zero
	// means framework/fake.
	Envtest *envtest.Environment

	// Steps are the scenario, applied in order; after each, the explorer
	// waits until the controllers have converged. Required.
	Steps []Step

	// Invariants must hold whenever the controllers are quiet: when each
	// step has converged, and while a crashed manager is down (before its
	// replacement starts). Zero means none.
	Invariants []Invariant

	// Converged must hold once the controllers have converged: after each
	// step, and at the end. Zero means none.
	Converged []Invariant

	// Faults says which faults schedules draw, and how many. Zero means
	// every kind, up to 3 per schedule.
	Faults FaultOptions

	// Schedules is how many schedules to explore, the fault-free reference
	// schedule included. The -converge.schedules flag, when set, wins.
	// Zero means DefaultSchedules, DefaultEnvtestSchedules with Envtest.
	Schedules int

	// Parallel is how many schedules run at once. Setup is then called
	// from that many goroutines at once, so it must not change state the
	// schedules share (package variables) but its manager's. Zero means 2
	// (1 on a single CPU, and with Envtest, whose schedules share the
	// cluster: there it must be 1).
	Parallel int

	// Seed is the first schedule's seed (schedule i has Seed+i). The
	// -converge.seed flag, when set, wins and replays that one schedule.
	// Zero means one derived from the test's name in Run (so a test's
	// schedules are the same on every run), and 1 in Check.
	Seed uint64

	// ConvergeTimeout bounds, in wall time, each wait for the controllers
	// to converge (after each step, after each restart of a manager, and
	// from when a restarted kube-apiserver is up again); a schedule
	// that does not converge in time fails, naming what was still queued,
	// in flight or failing. Zero means 30 seconds.
	ConvergeTimeout time.Duration
}

// FaultOptions configures the faults a schedule draws.
type FaultOptions struct {
	// Kinds are the kinds of fault drawn. Zero means all those the plane
	// can take: Conflict, ServerError, Crash and Lag on framework/fake;
	// Conflict, ServerError, Crash, Restart, Expire and Hold with
	// Options.Envtest.
	Kinds []FaultKind

	// Max is the most faults one schedule draws (each draws 1 to Max).
	// Zero means 3; negative means none (every schedule is fault-free).
	Max int

	// MaxLag is how many events a lagging manager's watches hold back
	// (see Lag). Zero means 3.
	MaxLag int
}

func (o Options) withDefaults() Options {
	if o.Scheme == nil {
		o.Scheme = scheme.Scheme
	}
	if len(o.Faults.Kinds) == 0 {
		o.Faults.Kinds = fakeKinds
		if o.Envtest != nil {
			o.Faults.Kinds = realKinds
		}
	}
	if o.Faults.Max == 0 {
		o.Faults.Max = 3
	}
	if o.Faults.MaxLag == 0 {
		o.Faults.MaxLag = 3
	}
	if o.Schedules == 0 {
		o.Schedules = DefaultSchedules
		if o.Envtest != nil {
			o.Schedules = DefaultEnvtestSchedules
		}
	}
	if o.Parallel == 0 {
		o.Parallel = max(1, min(2, goruntime.GOMAXPROCS(0)))
		if o.Envtest != nil {
			o.Parallel = 1
		}
	}
	if o.ConvergeTimeout == 0 {
		o.ConvergeTimeout = 30 * time.Second
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.Setup == nil {
		errs = append(errs, errors.New("Options.Setup is nil"))
	}
	if len(o.Steps) == 0 {
		errs = append(errs, errors.New("Options.Steps is empty: a scenario needs at least one step"))
	}
	for i, s := range o.Steps {
		if s.Do == nil {
			errs = append(errs, fmt.Errorf("Options.Steps[%d] (%q) has no Do", i, s.Name))
		}
		if s.obj != nil && typednil.Is(s.obj) {
			errs = append(errs, fmt.Errorf("Options.Steps[%d] (%q): its object is nil (%T)", i, s.Name, s.obj))
		}
	}
	for field, list := range map[string][]Invariant{"Invariants": o.Invariants, "Converged": o.Converged} {
		for i, inv := range list {
			if inv.Check == nil {
				errs = append(errs, fmt.Errorf("Options.%s[%d] (%q) has no Check", field, i, inv.Name))
			}
			if inv.Name == "" {
				errs = append(errs, fmt.Errorf("Options.%s[%d] has no Name", field, i))
			}
		}
	}
	for i, obj := range o.ClusterScoped {
		if typednil.Is(obj) {
			errs = append(errs, fmt.Errorf("Options.ClusterScoped[%d] is nil (%T)", i, obj))
		}
	}
	for i, obj := range o.Objects {
		if typednil.Is(obj) {
			errs = append(errs, fmt.Errorf("Options.Objects[%d] is nil (%T)", i, obj))
		}
	}
	for i, k := range o.Faults.Kinds {
		switch {
		case k < Conflict || k > Hold:
			errs = append(errs, fmt.Errorf("Options.Faults.Kinds[%d] is %d, not a FaultKind", i, int(k)))
		case o.Envtest == nil && !slices.Contains(fakeKinds, k):
			errs = append(errs, fmt.Errorf("Options.Faults.Kinds[%d] is %v, which needs a test control plane (Options.Envtest)", i, k))
		case o.Envtest != nil && !slices.Contains(realKinds, k):
			errs = append(errs, fmt.Errorf("Options.Faults.Kinds[%d] is %v, which framework/fake only can inject, not Options.Envtest", i, k))
		}
	}
	if o.Envtest != nil {
		if o.Envtest.Config() == nil {
			errs = append(errs, errors.New("Options.Envtest is not started (or stopped): call its Start first"))
		}
		if o.Parallel > 1 {
			errs = append(errs, fmt.Errorf("Options.Parallel is %d: with Options.Envtest the schedules share the cluster and run one at a time", o.Parallel))
		}
		if len(o.ClusterScoped) > 0 {
			errs = append(errs, errors.New("Options.ClusterScoped is for framework/fake: on Options.Envtest each CRD's scope says it"))
		}
	}
	if o.Schedules < 0 {
		errs = append(errs, fmt.Errorf("Options.Schedules is %d: it must not be negative", o.Schedules))
	}
	if o.Parallel < 0 {
		errs = append(errs, fmt.Errorf("Options.Parallel is %d: it must not be negative", o.Parallel))
	}
	if o.Faults.MaxLag < 0 {
		errs = append(errs, fmt.Errorf("Options.Faults.MaxLag is %d: it must not be negative", o.Faults.MaxLag))
	}
	if o.ConvergeTimeout < 0 {
		errs = append(errs, fmt.Errorf("Options.ConvergeTimeout is %v: it must not be negative", o.ConvergeTimeout))
	}
	return errors.Join(errs...)
}
