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
// schedule starts a fresh fake API server (or, on a test control plane,
// runs on the shared cluster) and a manager with Setup,
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
// serialises, counting first attempts only: the retry of a write a fault
// answered or cut off (the next write of that manager with the same verb
// and object) gets no number, so removing a fault while shrinking shifts
// no later write. A plan is drawn from the seed and the number of writes
// the fault-free reference schedule sent: n among writes 1 to the larger
// of 12 and that number, k among the steps, no two faults on the same
// write or step. A fault on a write the run does not reach does not fire;
// the report says so, and a passing Run logs how many faults of each kind
// were injected and how many did not fire.
//
// # On a test control plane
//
// With Options.Envtest the same scenario and invariants run on a started
// framework/envtest Environment: kube-apiserver and etcd, with admission,
// defaulting, validation and the wire encodings of a real cluster. The
// managers reach kube-apiserver through a TCP proxy of the schedule's, and
// the managers' and the scenario's clients send their requests through an
// http.RoundTripper of the explorer's, which numbers and records the
// writes and injects Conflict, ServerError and Crash as on the fake. The
// real plane adds three faults:
//
//   - Restart: kube-apiserver is killed (SIGKILL) as the controllers send
//     their n-th write, and started again at once on the same port and etcd
//     data. The write is lost: it fails with a reset connection and takes no
//     effect (it is not sent, so that it never reaches the restarted
//     kube-apiserver, however late this process runs). The controllers'
//     other requests fail until kube-apiserver is ready, and their watches
//     resume; the scenario's requests wait.
//   - Expire: step k is applied while the proxy holds the manager's
//     connection; then etcd is compacted and the connection broken, so the
//     watches resume from a compacted resource version, get 410 Gone and
//     list again. The fault fires when an informer lists again within 5
//     seconds; kube-apiserver must run with --watch-cache=false, or it
//     resumes the watches from its watch cache and the fault does not fire.
//   - Hold: the proxy holds the manager's connection (the n-th write, later
//     requests and watch events) while the next step is applied, then
//     releases it: the write lands late, on a cluster that moved on.
//
// Lag is the fake's alone. Schedules run one at a time on the shared
// cluster (Parallel must be 1); after each, the explorer deletes what the
// scenario and the controllers created (answered 201 Created), removing
// finalizers first, and waits until it is gone; Namespaces are left, so
// the namespaces a scenario uses must exist before Check or Run. The
// controllers run in wall time and a restart takes seconds, so the
// default is DefaultEnvtestSchedules (10), and the quiet period that
// counts as converged is 100 ms (15 ms on the fake, where the explorer
// also knows when every watch event has been delivered). A replay repeats
// the fault plan, each fault on the same numbered write or step, but not
// the interleaving of the controllers with kube-apiserver. A test sets it
// up as:
//
//	env := envtest.New(envtest.Options{APIServerFlags: []string{"--watch-cache=false"}})
//	if _, err := env.Start(t.Context()); err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { env.Stop() })
//	// ... create the Namespaces the scenario uses ...
//	opts.Envtest = env // opts: the Options of the test on framework/fake
//	explore.Run(t, opts)
//
// A replay token must be replayed on the plane that printed it: a Restart,
// Expire or Hold token on the fake, or a Lag token on a test control plane,
// is refused.
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
// -converge.faults carries the faults themselves (409@wN, 500@wN,
// crash@wN, restart@wN and hold@wN on the N-th write, from 1; lag@sK and
// expire@sK on step K, from 0), so a
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
// Schedules run two at a time on the fake (Options.Parallel), so Setup
// may be called from two goroutines at once. The package registers its
// flags on flag.CommandLine: import it from tests only.
//
// # Limits
//
// No leader handover, no restart that reads an older view (one
// kube-apiserver has no stale peer), no sharding. The fake runs no
// built-in controllers (a scenario plays them, as the StatefulSet
// controller's status in a step) and collects garbage within the request
// that leaves it; a test control plane runs them only with
// envtest.Options.ControllerManager. Each schedule costs a fake API server
// and a manager start or more, about 0.1 s on one core; on a test control
// plane about a second, plus a few for each restart.
package explore
