// Package explore finds a program's controller bugs before production: it
// runs the program's controllers (the setup function its main calls) on
// framework/fake, the API server in memory, through a scenario of steps,
// under many seeded schedules of the faults Kubernetes promises will
// happen, and checks the invariants the test writes.
//
//	func TestDB(t *testing.T) {
//		explore.Run(t, explore.Options{
//			Setup:     controller.SetupAll,
//			Scheme:    scheme,
//			Steps:     []explore.Step{explore.Create(db), explore.Delete(db)},
//			Converged: []explore.Invariant{{Name: "each DB has its Secret", Check: hasSecret}},
//		})
//	}
//
// # Schedules
//
// Schedule 0 runs the scenario without faults: the reference. Each other
// schedule starts a fresh fake API server and a manager with Setup,
// applies the steps in order, and injects the faults its seed draws (1 to
// FaultOptions.Max), each placed by a trigger, as Sieve (OSDI '22) places
// its faults:
//
//   - Conflict, ServerError: the n-th write the controllers send is
//     answered 409 Conflict, or 500 without Retry-After, and changes
//     nothing.
//   - Crash: right after the n-th write commits, the manager's process
//     "dies": its later writes are refused with no answer, its context is
//     cancelled with no drain, and a new manager starts with Setup on the
//     same cluster (its cache lists what is there now).
//   - Lag: from step k on, the manager's watches hold back up to
//     FaultOptions.MaxLag events each; step k+1 is applied before the
//     controllers have seen step k, then the events are released, in order
//     on each watch and in any order between watches (stale reads).
//
// Writes are numbered among the controllers' writes, which the explorer
// serialises. A plan is drawn from the seed alone, never from what a run
// did: n among writes 1 to 12, k among the steps, no two faults on the
// same write. A fault on a write the run does not reach does not fire; the
// report says so, and a passing Run logs how many faults of each kind
// were injected and how many did not fire.
//
// # Properties
//
// After each step the explorer waits, in wall time bounded by
// Options.ConvergeTimeout, until the controllers have converged: every
// informer synced, nothing queued or in flight, no key whose last
// reconcile failed, and no write for a short quiet period. It then checks
// Invariants and Converged; Invariants are also checked while a crashed
// manager is down. A schedule fails when an invariant is broken, when the
// controllers do not converge (the report names what was still queued,
// in flight or failing and its error), or when the controllers deleted an
// object more often than in the reference schedule (Sieve's delete-count
// oracle: a delete on a stale read often leaves no other trace). A
// broken invariant is checked again after a longer quiet period before it
// counts, so that an event still on its way to a cache raises no alarm.
//
// # Reports and replays
//
// A failure is shrunk: the explorer looks for the smallest subset of the
// schedule's faults that still breaks the same property (delta
// debugging), and Run fails the test with the seed, the broken property,
// the faults and the writes they hit, and the command that replays it:
//
//	go test -run '^TestDB$' ./internal/controller -converge.faults=500@w4,lag@s1
//
// -converge.faults carries the faults themselves (409@wN, 500@wN and
// crash@wN on the N-th write, from 1; lag@sK from step K, from 0), so a
// replay does not depend on the seed or on the reference schedule: it runs
// the reference, then one schedule with exactly these faults, each on the
// same numbered write or step. It does not repeat the goroutines'
// interleaving: the controllers run as in production, on real goroutines
// and wall time, so the n-th write may be another request when the
// controllers race, and a replay fails again when the bug does not hang
// on a race, and usually when it does. -converge.seed runs one seed's
// whole plan. Run derives the first seed from the test's name, so a test
// explores the same plans on every run; -converge.schedules explores more
// (a nightly job). An Invariant's Check or a Step's Do that panics breaks
// its property, reported as any other.
//
// Schedules run two at a time (Options.Parallel), so Setup may be called
// from two goroutines at once. The
// package registers its flags on flag.CommandLine: import it from tests
// only.
//
// # Limits
//
// Faults are those the fake API server can inject: no leader handover,
// no relist after an expired watch, no restart that reads an older view,
// no sharding. The fake runs no built-in controllers (a scenario plays
// them, as the StatefulSet controller's status in a step) and collects
// garbage within the request that leaves it. Each schedule costs a fake API
// server and a manager start or more, about 0.1 s on one core.
package explore
