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
)

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
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one fault of a schedule's plan, placed by a trigger: a write
// (the n-th write request the controllers send in the schedule, counted
// over every manager, from 1) or a step.
type Fault struct {
	Kind FaultKind
	// Write is the write a Conflict or ServerError answers, or the write
	// after which a Crash happens (if it commits).
	Write int
	// Step is the step (from 0) during which a Lag holds events.
	Step int
}

func (f Fault) String() string {
	switch f.Kind {
	case Conflict:
		return fmt.Sprintf("409 Conflict on write %d", f.Write)
	case ServerError:
		return fmt.Sprintf("500 on write %d", f.Write)
	case Crash:
		return fmt.Sprintf("crash after write %d, restart", f.Write)
	case Lag:
		return fmt.Sprintf("watches lag from step %d", f.Step)
	}
	return f.Kind.String()
}

// plan draws a schedule's faults from its seed: 1 to max faults (a
// fault drawn twice counts once), each of
// a kind among kinds, a write trigger among the writes of the reference
// schedule and a step trigger among the steps. The same arguments draw
// the same plan.
func plan(seed uint64, kinds []FaultKind, maxFaults, writes, steps int) []Fault {
	if maxFaults <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x636f6e7665726765)) // "converge"
	n := 1 + rng.IntN(maxFaults)
	var out []Fault
	for range n {
		f := Fault{Kind: kinds[rng.IntN(len(kinds))]}
		if f.Kind == Lag {
			f.Step = rng.IntN(steps)
		} else {
			if writes == 0 {
				continue // the controllers write nothing to fault
			}
			f.Write = 1 + rng.IntN(writes)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// parseFaults reads a -converge.faults list: indexes (from 1) into a
// plan, separated by commas.
func parseFaults(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-converge.faults=%s: %q is not a fault's number (from 1)", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// subset returns the faults of p at indexes idx (from 1).
func subset(p []Fault, idx []int) ([]Fault, error) {
	out := make([]Fault, 0, len(idx))
	for _, i := range idx {
		if i > len(p) {
			return nil, fmt.Errorf("fault %d: the schedule's plan has %d faults", i, len(p))
		}
		out = append(out, p[i-1])
	}
	return out, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
