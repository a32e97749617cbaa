package sharding_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/test/sharding/report"
)

// engagement is one engagement of a spread cluster by a member process,
// [from, to] on this machine's clock as the member's cluster.Listener
// reported it; to is zero while it lasts.
type engagement struct {
	identity, cluster string
	pid               int
	from, to          time.Time
}

// window is a stretch of time; a zero to means it goes on.
type window struct{ from, to time.Time }

// engage records engagement report c. A report of a SIGKILLed process
// read after its kill ends at the kill.
func (r *referee) engage(c report.Engagement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := time.Unix(0, c.At)
	if c.Engaged {
		e := &engagement{identity: c.Member, cluster: c.Cluster, pid: c.Process, from: at}
		if k, ok := r.killedAt[c.Process]; ok {
			e.to = k
		}
		r.engagements = append(r.engagements, e)
		return
	}
	for _, e := range r.engagements {
		if e.pid == c.Process && e.cluster == c.Cluster && e.to.IsZero() {
			e.to = at
		}
	}
}

// froze records that process pid was SIGSTOPped at at; thawed that it was
// SIGCONTed.
func (r *referee) froze(pid int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen[pid] = append(r.frozen[pid], window{from: at})
}

func (r *referee) thawed(pid int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ws := r.frozen[pid]; len(ws) > 0 && ws[len(ws)-1].to.IsZero() {
		ws[len(ws)-1].to = at
	}
}

// frozenAtLocked reports whether process pid was stopped at at. r.mu must
// be held.
func (r *referee) frozenAtLocked(pid int, at time.Time) bool {
	for _, w := range r.frozen[pid] {
		if !at.Before(w.from) && (w.to.IsZero() || at.Before(w.to)) {
			return true
		}
	}
	return false
}

// stoppedDuringLocked reports whether e's process was stopped while e
// lasted. The suite stops a process only past its Lease, so e is no hold
// any more: it lasts until the process, woken, finds the Lease lost. r.mu
// must be held.
func (r *referee) stoppedDuringLocked(e *engagement) bool {
	for _, w := range r.frozen[e.pid] {
		if e.from.Before(w.from) && (e.to.IsZero() || e.to.After(w.from)) {
			return true
		}
	}
	return false
}

// holders returns the identities engaging each cluster now, leaving out
// the engagements of a process stopped while they lasted (see
// stoppedDuringLocked).
func (r *referee) holders() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, e := range r.engagements {
		if e.to.IsZero() && !r.stoppedDuringLocked(e) {
			out[e.cluster] = append(out[e.cluster], e.identity)
		}
	}
	return out
}

// spread reports how many of clusters each of live engages now, and
// whether each of clusters is engaged by exactly one member, one of live,
// with every count within one of every other.
func (r *referee) spread(live, clusters []string) (counts []int, even bool) {
	h := r.holders()
	load := map[string]int{}
	even = true
	for _, c := range clusters {
		if len(h[c]) != 1 || !slices.Contains(live, h[c][0]) {
			even = false
			continue
		}
		load[h[c][0]]++
	}
	for _, m := range live {
		counts = append(counts, load[m])
	}
	return counts, even && len(counts) > 0 && slices.Max(counts)-slices.Min(counts) <= 1
}

// begun counts the engagements that began in [from, to].
func (r *referee) begun(from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.engagements {
		if !e.from.Before(from) && !e.from.After(to) {
			n++
		}
	}
	return n
}

// engagedBy counts the engagements member's processes reported.
func (r *referee) engagedBy(member string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.engagements {
		if e.identity == member {
			n++
		}
	}
	return n
}

// openSpans returns member's reconciles in flight.
func (r *referee) openSpans(member string) []*span {
	var out []*span
	r.eachOf(member, func(s *span) {
		if s.outcome == outcomeOpen {
			out = append(out, s)
		}
	})
	return out
}

// outcomesOfSpans counts spans by their outcome now.
func (r *referee) outcomesOfSpans(spans []*span) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, s := range spans {
		out[s.outcome]++
	}
	return out
}

// engagementVerdict sorts the pairs of engagements of one cluster by two
// processes that overlap in time.
type engagementVerdict struct {
	engagements int
	// doubles: two processes engaged the cluster at once. These must be 0
	// on a ring that spreads clusters.
	doubles int
	// frozen: at once, but the second engagement began while the first
	// holder was stopped (SIGSTOP), past its Lease: its engagement lasts
	// until it wakes and finds the Lease lost, while it can do nothing.
	// Its writes are the reconciles' verdict's to judge.
	frozen   int
	examples []string
}

// judgeEngagements computes the engagement verdict over every engagement
// reported so far; those still open count as lasting until now.
func (r *referee) judgeEngagements() engagementVerdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	end := func(e *engagement) time.Time {
		if e.to.IsZero() {
			return now
		}
		return e.to
	}
	v := engagementVerdict{engagements: len(r.engagements)}
	for i, a := range r.engagements {
		for _, b := range r.engagements[i+1:] {
			if a.cluster != b.cluster || a.pid == b.pid || !a.from.Before(end(b)) || !b.from.Before(end(a)) {
				continue
			}
			first, second := a, b
			if b.from.Before(a.from) {
				first, second = b, a
			}
			if r.frozenAtLocked(first.pid, second.from) {
				v.frozen++
				continue
			}
			v.doubles++
			if len(v.examples) < 5 {
				v.examples = append(v.examples, fmt.Sprintf("%s engaged by %s (pid %d) %s–%s and %s (pid %d) %s–%s", a.cluster,
					a.identity, a.pid, a.from.Format("15:04:05.000"), stamp(a.to), b.identity, b.pid, b.from.Format("15:04:05.000"), stamp(b.to)))
			}
		}
	}
	return v
}

// stamp formats an engagement's end, "open" when it lasts.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Format("15:04:05.000")
}

func TestRefereeSortsEngagements(t *testing.T) {
	at := func(ms int) int64 { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	// eng is an engagement of cluster c by process pid from..to ms (-1:
	// still engaged).
	type eng struct {
		pid      int
		c        string
		from, to int
	}
	for _, tc := range []struct {
		name   string
		engs   []eng
		kill   int // pid SIGKILLed at 50 ms
		freeze int // pid SIGSTOPped from 20 ms to 80 ms
		want   [2]int
	}{
		{"handed over", []eng{{1, "a", 0, 10}, {2, "a", 10, 20}}, 0, 0, [2]int{0, 0}},
		{"two clusters at once", []eng{{1, "a", 0, 10}, {2, "b", 5, 20}}, 0, 0, [2]int{0, 0}},
		{"the same process again", []eng{{1, "a", 0, 10}, {1, "a", 5, 20}}, 0, 0, [2]int{0, 0}},
		{"a double", []eng{{1, "a", 0, 10}, {2, "a", 5, 20}}, 0, 0, [2]int{1, 0}},
		{"a double still open", []eng{{1, "a", 0, -1}, {2, "a", 5, -1}}, 0, 0, [2]int{1, 0}},
		{"engaged again after a kill", []eng{{1, "a", 0, -1}, {2, "a", 60, -1}}, 1, 0, [2]int{0, 0}},
		{"engaged elsewhere before a kill", []eng{{1, "a", 0, -1}, {2, "a", 40, -1}}, 1, 0, [2]int{1, 0}},
		{"engaged elsewhere while frozen", []eng{{1, "a", 0, 90}, {2, "a", 40, -1}}, 0, 1, [2]int{0, 1}},
		{"engaged elsewhere before the freeze", []eng{{1, "a", 0, 90}, {2, "a", 10, -1}}, 0, 1, [2]int{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReferee(t)
			if tc.freeze != 0 {
				r.froze(tc.freeze, time.Unix(0, at(20)))
				r.thawed(tc.freeze, time.Unix(0, at(80)))
			}
			for _, e := range tc.engs {
				r.engage(report.Engagement{Member: fmt.Sprint("m", e.pid), Process: e.pid, Cluster: e.c, Engaged: true, At: at(e.from)})
				if e.to >= 0 {
					r.engage(report.Engagement{Member: fmt.Sprint("m", e.pid), Process: e.pid, Cluster: e.c, At: at(e.to)})
				}
			}
			if tc.kill != 0 {
				r.killed(tc.kill, time.Unix(0, at(50)))
			}
			v := r.judgeEngagements()
			if got := [2]int{v.doubles, v.frozen}; got != tc.want {
				t.Errorf("doubles, frozen = %v, want %v (%s)", got, tc.want, strings.Join(v.examples, "; "))
			}
		})
	}
}
