package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// FaultKind is a kind of fault a schedule may inject.
type FaultKind int

const (
	// Conflict answers one write of the controllers with 409 Conflict, as
	// when another writer changed the object first.
	Conflict FaultKind = iota + 1
	// ServerError answers one write of the controllers with 500 Internal
	// Server Error, without Retry-After (the client does not retry).
	ServerError
	// Crash kills the manager right after one of its writes commits (every
	// later write of the process is refused, its context is cancelled, as
	// after kill -9), then starts a new manager with Setup on the same
	// cluster.
	Crash
	// Lag makes the manager's watches hold back up to
	// FaultOptions.MaxLag events (per watch) from one step on: the next
	// step is applied before the controllers have seen this one, and the
	// held events are released, in order per watch, once the controllers
	// are quiet after it (stale reads, in the windows between kinds). A
	// change the manager makes itself is never held back, nor is what
	// came before it on its watch. Invariants are not checked between the
	// two steps.
	Lag
	// Restart kills kube-apiserver (SIGKILL) as the controllers send one
	// of their writes, then starts it again on the same port and etcd
	// data. The write is lost: it fails with a reset connection
	// (syscall.ECONNRESET) and takes no effect. The controllers' other
	// requests fail meanwhile, and their watches resume. On
	// Options.Envtest only.
	Restart
	// Expire cuts the manager off while one step is applied (its
	// connection is held), compacts etcd, then breaks the connection: the
	// watches resume from a compacted resource version, get 410 Gone, and
	// the informers list again, so the controllers never see the events
	// of the step, only its end state (unobserved states). It needs
	// kube-apiserver without its watch cache (--watch-cache=false), which
	// otherwise resumes the watches from memory: the fault then does not
	// fire. On Options.Envtest only.
	Expire
	// Hold holds the manager's connection to kube-apiserver as the
	// controllers send one of their writes: the write, every later
	// request and every watch event wait in a proxy while the next step
	// is applied, then the connection is released and they go on, in
	// order (the write lands late, on a cluster that moved on). On
	// Options.Envtest only.
	Hold
)

// fakeKinds and realKinds are the kinds of fault framework/fake and a
// test control plane can take.
var (
	fakeKinds = []FaultKind{Conflict, ServerError, Crash, Lag}
	realKinds = []FaultKind{Conflict, ServerError, Crash, Restart, Expire, Hold}
)

// onStep reports whether k's trigger is a step (else a write).
func (k FaultKind) onStep() bool { return k == Lag || k == Expire }

func (k FaultKind) String() string {
	switch k {
	case Conflict:
		return "Conflict"
	case ServerError:
		return "ServerError"
	case Crash:
		return "Crash"
	case Lag:
		return "Lag"
	case Restart:
		return "Restart"
	case Expire:
		return "Expire"
	case Hold:
		return "Hold"
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one fault of a schedule's plan, placed by a trigger: a write
// (the n-th write request the controllers send in the schedule, counted
// over every manager, from 1) or a step.
type Fault struct {
	Kind FaultKind
	// Write is the write a Conflict or ServerError answers, the write
	// after which a Crash happens (if it commits), or the write a Restart
	// or Hold meets.
	Write int
	// Step is the step (from 0) during which a Lag holds events, or
	// that an Expire hides.
	Step int
}

func (f Fault) String() string {
	switch f.Kind {
	case Conflict:
		return fmt.Sprintf("409 Conflict on write %d", f.Write)
	case ServerError:
		return fmt.Sprintf("500 on write %d", f.Write)
	case Crash:
		return fmt.Sprintf("the manager crashes after write %d and starts again", f.Write)
	case Lag:
		return fmt.Sprintf("watches lag from step %d", f.Step)
	case Restart:
		return fmt.Sprintf("kube-apiserver restarts at write %d", f.Write)
	case Expire:
		return fmt.Sprintf("watches expire during step %d", f.Step)
	case Hold:
		return fmt.Sprintf("connection held at write %d through the next step", f.Write)
	}
	return f.Kind.String()
}

// minWrites is the least range write triggers are drawn in: writes 1 to
// max(minWrites, the writes of the fault-free reference schedule). A
// fault on a write the run does not reach does not fire.
const minWrites = 12

// plan draws a schedule's faults from its seed and the range of writes:
// 1 to max faults, each of a kind among kinds, a write trigger among
// writes 1 to writes (never a write another fault of the plan has) and a
// step trigger among the steps (never a step another fault has). The
// same arguments draw the same plan, whatever the controllers do.
func plan(seed uint64, kinds []FaultKind, maxFaults, steps, writes int) []Fault {
	if maxFaults <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x636f6e7665726765)) // "converge"
	n := 1 + rng.IntN(maxFaults)
	var out []Fault
	for range n {
		f := Fault{Kind: kinds[rng.IntN(len(kinds))]}
		if f.Kind.onStep() {
			f.Step = rng.IntN(steps)
		} else {
			f.Write = 1 + rng.IntN(writes)
		}
		if !slices.ContainsFunc(out, f.collides) {
			out = append(out, f)
		}
	}
	return out
}

// collides reports whether f and g share a trigger: the same write, or
// the same step.
func (f Fault) collides(g Fault) bool {
	if f.Kind.onStep() != g.Kind.onStep() {
		return false
	}
	if f.Kind.onStep() {
		return f.Step == g.Step
	}
	return f.Write == g.Write
}

// token is f as -converge.faults writes it: 409@w3, 500@w4, crash@w2,
// lag@s1, restart@w5, hold@w1, expire@s2.
func (f Fault) token() string {
	name := tokenNames[f.Kind]
	if f.Kind.onStep() {
		return fmt.Sprintf("%s@s%d", name, f.Step)
	}
	return fmt.Sprintf("%s@w%d", name, f.Write)
}

var tokenNames = map[FaultKind]string{Conflict: "409", ServerError: "500", Crash: "crash", Lag: "lag", Restart: "restart", Expire: "expire", Hold: "hold"}

func tokens(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.token()
	}
	return strings.Join(s, ",")
}

// parseFaults reads a -converge.faults list of fault tokens (see
// Fault.token), separated by commas; steps must be below steps.
func parseFaults(s string, steps int) ([]Fault, error) {
	if s == "" {
		return nil, nil
	}
	var out []Fault
	for _, tok := range strings.Split(s, ",") {
		f, err := parseFault(strings.TrimSpace(tok), steps)
		if err != nil {
			return nil, fmt.Errorf("-converge.faults=%s: %w", s, err)
		}
		if slices.ContainsFunc(out, f.collides) {
			return nil, fmt.Errorf("-converge.faults=%s: %q: another fault has the same trigger", s, tok)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFault(tok string, steps int) (Fault, error) {
	bad := fmt.Errorf("%q is not a fault: want 409@wN, 500@wN, crash@wN, restart@wN or hold@wN (on the N-th write, from 1), or lag@sK or expire@sK (step K, from 0)", tok)
	kind, trig, ok := strings.Cut(tok, "@")
	if !ok || len(trig) < 2 {
		return Fault{}, bad
	}
	n, err := strconv.Atoi(trig[1:])
	if err != nil || n < 0 {
		return Fault{}, bad
	}
	var f Fault
	for k, name := range tokenNames {
		if name == kind {
			f.Kind = k
		}
	}
	if f.Kind == 0 {
		return Fault{}, bad
	}
	switch {
	case f.Kind.onStep() && trig[0] == 's':
		if n >= steps {
			return Fault{}, fmt.Errorf("%q: the scenario has steps 0 to %d", tok, steps-1)
		}
		f.Step = n
	case !f.Kind.onStep() && trig[0] == 'w' && n >= 1:
		f.Write = n
	default:
		return Fault{}, bad
	}
	return f, nil
}

// subset returns the faults of p at indexes idx (from 1).
func subset(p []Fault, idx []int) []Fault {
	out := make([]Fault, 0, len(idx))
	for _, i := range idx {
		out = append(out, p[i-1])
	}
	return out
}
