package explore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
)

// quietOptions is a scenario with no controller: one ConfigMap created.
func quietOptions() Options {
	return Options{
		Setup: func(*framework.Manager) error { return nil },
		Steps: []Step{Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})},
		Seed:  5,
	}
}

// A panicking Invariant breaks its property; the report names it, the
// schedule, the seed and the replay command.
func TestAPanickingInvariantBreaksItsProperty(t *testing.T) {
	opts := quietOptions()
	opts.Schedules = 3
	opts.Converged = []Invariant{{Name: "writes a nil map", Check: func(context.Context, *Snapshot) error {
		var m map[string]int
		m["x"] = 1
		return nil
	}}}
	f, err := (&explorer{test: "TestX"}).check(t.Context(), opts)
	if err != nil || f == nil {
		t.Fatalf("got %v, %v", f, err)
	}
	msg := f.Error()
	for _, want := range []string{`broke "writes a nil map"`, "panic: assignment to entry in nil map", "seed 5", "schedule 0", "replay: go test -run '^TestX$'"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the report lacks %q:\n%s", want, msg)
		}
	}
}

// A panicking Step's Do breaks the scenario.
func TestAPanickingStepBreaksTheScenario(t *testing.T) {
	opts := quietOptions()
	opts.Steps = append(opts.Steps, Step{Name: "boom", Do: func(context.Context, *client.Client) error { panic("boom") }})
	f, err := (&explorer{test: "TestX"}).check(t.Context(), opts)
	if err != nil || f == nil {
		t.Fatalf("got %v, %v", f, err)
	}
	if f.Broken != "scenario" || !strings.Contains(f.Err.Error(), "step 1 (boom): panic: boom") {
		t.Errorf("got %s", f)
	}
}

// A typed nil given to Create or Delete is refused by validation, naming
// the step.
func TestATypedNilStepObjectIsRefused(t *testing.T) {
	opts := quietOptions()
	opts.Steps = []Step{Create((*corev1.ConfigMap)(nil)), Delete((*corev1.Secret)(nil))}
	_, err := Check(t.Context(), opts)
	if err == nil {
		t.Fatal("taken")
	}
	for _, want := range []string{`Options.Steps[0] ("create *v1.ConfigMap <nil>"): its object is nil (*v1.ConfigMap)`, `Options.Steps[1] ("delete *v1.Secret <nil>")`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

// A passing exploration counts what it did; one schedule says that no
// fault was injected.
func TestAPassingRunSaysWhatItExplored(t *testing.T) {
	opts := quietOptions()
	opts.Schedules = 1
	e := &explorer{test: "TestX"}
	if f, err := e.check(t.Context(), opts); f != nil || err != nil {
		t.Fatalf("got %v, %v", f, err)
	}
	if got := e.stats.String(); !strings.Contains(got, "1 schedule, the fault-free reference: no fault injected") {
		t.Errorf("one schedule: %s", got)
	}
	opts.Schedules = 6
	e = &explorer{test: "TestX"}
	if f, err := e.check(t.Context(), opts); f != nil || err != nil {
		t.Fatalf("got %v, %v", f, err)
	}
	got := e.stats.String()
	// No controller writes: every write fault misses, the Lags fire.
	if !strings.Contains(got, "6 schedules") || !strings.Contains(got, "did not fire") || e.stats.unfired == 0 {
		t.Errorf("six schedules: %s (%+v)", got, e.stats)
	}
}

// Setup failing in a later schedule names the schedule, its seed and the
// replay command.
func TestSetupFailingLaterNamesTheSchedule(t *testing.T) {
	opts := quietOptions()
	opts.Schedules = 4
	opts.Parallel = 1
	var calls atomic.Int32
	opts.Setup = func(*framework.Manager) error {
		if calls.Add(1) == 2 {
			return errors.New("no license key")
		}
		return nil
	}
	_, err := (&explorer{test: "TestX"}).check(t.Context(), opts)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"no license key", "in schedule 1 of 4 (seed 6", "replay: go test -run '^TestX$' ./framework/explore -converge.faults="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

// A negative -converge.schedules is reported as the flag.
func TestANegativeSchedulesFlagNamesTheFlag(t *testing.T) {
	old := *schedulesFlag
	*schedulesFlag = -3
	defer func() { *schedulesFlag = old }()
	_, _, err := fromFlags("TestX", quietOptions())
	if err == nil || !strings.Contains(err.Error(), "-converge.schedules=-3") {
		t.Errorf("got %v", err)
	}
}
