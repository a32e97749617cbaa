package main

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// phase names a part of a contender's run; latencies are kept per phase.
type phase int

const (
	phaseStorm phase = iota
	phaseSteady
	phaseBurst
	phaseBacklog
	numPhases
)

// pending is an update the driver wrote and the contender has not reported yet.
type pending struct {
	gen   int64
	wrote int64 // unix nanos, just before the write was sent
	phase phase
}

type memStats struct {
	heapAlloc, heapInuse, heapSys, sys, numGC uint64
	// The maxima during the first sync (until "syncdone"): heap objects
	// (live and unswept), live heap as of the last GC, heap goal; and the
	// GC cycles by then; the largest heap objects before the first
	// reconcile.
	peakObjects, peakLive, peakGoal, syncGCs, peakBefore uint64
}

// replies are one contender process's answers to the driver's requests on
// its standard input (see internal/report).
type replies struct {
	mem     chan memStats
	acks    chan string             // "heap": the profile's path
	status  chan string             // "status": key=value fields
	runtime chan map[string]float64 // "runtime": runtime/metrics by name
	reads   chan string             // "reads": key=value fields
}

func newReplies() replies {
	return replies{mem: make(chan memStats, 1), acks: make(chan string, 1), status: make(chan string, 1), runtime: make(chan map[string]float64, 1), reads: make(chan string, 1)}
}

// tracker follows what one contender process reports, or several: the
// members of a ring report into one tracker, each through its own replies.
type tracker struct {
	index   map[string]int // "namespace/name" -> object index
	replies                // those of the process read by read

	mu sync.Mutex
	// firstSeen is when each object was first reported (unix nanos), 0 if never.
	firstSeen []int64
	nSeen     int
	lastFirst int64 // the latest firstSeen
	// pend holds the unreported updates per object; mu guards it and below.
	pend        map[int][]pending
	outstanding [numPhases]int
	latencies   [numPhases][]time.Duration
	lastAt      [numPhases]int64 // latest report that settled an update of the phase
	reports     int

	firstReport chan struct{} // closed at the first report
	allSeen     chan struct{} // closed once every object was reported
}

func newTracker(index map[string]int) *tracker {
	return &tracker{
		index:       index,
		firstSeen:   make([]int64, len(index)),
		pend:        map[int][]pending{},
		firstReport: make(chan struct{}),
		allSeen:     make(chan struct{}),
		replies:     newReplies(),
	}
}

// expect registers an update of object i to gen, about to be written.
func (t *tracker) expect(i int, gen int64, p phase) {
	now := time.Now().UnixNano()
	t.mu.Lock()
	t.pend[i] = append(t.pend[i], pending{gen: gen, wrote: now, phase: p})
	t.outstanding[p]++
	t.mu.Unlock()
}

// outstandingIn returns how many updates of phase p are not reported yet.
func (t *tracker) outstandingIn(p phase) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.outstanding[p]
}

// waitPhase waits until every update of p was reported, or until timeout;
// it returns how many were not.
func (t *tracker) waitPhase(p phase, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		n := t.outstandingIn(p)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (t *tracker) results(p phase) ([]time.Duration, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.latencies[p]...), t.lastAt[p]
}

func (t *tracker) seen() (n int, last int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nSeen, t.lastFirst
}

// read consumes the contender's standard output until it closes.
func (t *tracker) read(r io.Reader) { t.readWith(r, t.replies) }

// readWith consumes one contender process's standard output until it
// closes, its reports going to t and its replies to rp. Several may run at
// once on one tracker.
func (t *tracker) readWith(r io.Reader, rp replies) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		switch line[0] {
		case 'R':
			f := strings.Fields(line)
			if len(f) != 5 {
				continue
			}
			i, ok := t.index[f[2]]
			if !ok {
				continue // an object the benchmark did not create
			}
			at, _ := strconv.ParseInt(f[1], 10, 64)
			gen, _ := strconv.ParseInt(f[4], 10, 64)
			t.report(i, at, gen)
		case 'M':
			f := strings.Fields(line)
			var m memStats
			for i, p := range []*uint64{&m.heapAlloc, &m.heapInuse, &m.heapSys, &m.sys, &m.numGC,
				&m.peakObjects, &m.peakLive, &m.peakGoal, &m.syncGCs, &m.peakBefore} {
				if i+1 < len(f) {
					*p, _ = strconv.ParseUint(f[i+1], 10, 64)
				}
			}
			rp.mem <- m
		case 'H':
			rp.acks <- strings.TrimSpace(line[1:])
		case 'S':
			rp.status <- strings.TrimSpace(line[1:])
		case 'Q':
			rp.reads <- strings.TrimSpace(line[1:])
		case 'X':
			m := map[string]float64{}
			for _, f := range strings.Fields(line[1:]) {
				if k, v, ok := strings.Cut(f, "="); ok {
					m[k], _ = strconv.ParseFloat(v, 64)
				}
			}
			rp.runtime <- m
		}
	}
}

func (t *tracker) report(i int, at, gen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reports == 0 {
		close(t.firstReport)
	}
	t.reports++
	if t.firstSeen[i] == 0 {
		t.firstSeen[i] = at
		t.nSeen++
		if at > t.lastFirst {
			t.lastFirst = at
		}
		if t.nSeen == len(t.firstSeen) {
			close(t.allSeen)
		}
	}
	ps := t.pend[i]
	if len(ps) == 0 {
		return
	}
	keep := ps[:0]
	for _, p := range ps {
		if p.gen > gen {
			keep = append(keep, p)
			continue
		}
		t.latencies[p.phase] = append(t.latencies[p.phase], time.Duration(max(at-p.wrote, 0)))
		t.outstanding[p.phase]--
		if at > t.lastAt[p.phase] {
			t.lastAt[p.phase] = at
		}
	}
	if len(keep) == 0 {
		delete(t.pend, i)
	} else {
		t.pend[i] = keep
	}
}
