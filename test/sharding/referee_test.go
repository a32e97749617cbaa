package sharding_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/converge-dev/converge/test/sharding/report"
)

// Outcomes the referee adds to report's. outcomeKilled closes the
// reconciles a member had entered and not exited when it was SIGKILLed:
// whether their writes reached the server is unknown, so they count as
// accepted.
const (
	outcomeKilled = "killed"
	outcomeOpen   = "open" // entered, not exited (yet)
)

// span is one reconcile as the referee saw it: [from, to] on this
// machine's clock, taken by the member; member names the process.
type span struct {
	member, key     string
	from, to        time.Time
	outcome         string
	readRV, writeRV int64
	// value is the data value the reconcile read, -1 when it did not
	// exit.
	value int
}

// accepted reports whether the reconcile's write reached the server (or
// may have).
func (s *span) accepted() bool { return s.outcome == report.Written || s.outcome == outcomeKilled }

// referee is the HTTP server the members report their reconciles and ring
// status to. It is safe for concurrent use.
type referee struct {
	srv *http.Server
	url string

	mu sync.Mutex
	// spans are every reconcile by process and id; status each member's
	// latest report; killedAt when each SIGKILLed process died; seen what
	// each member's reports ever said. mu guards them.
	spans    map[int]map[int64]*span
	status   map[string]report.Status
	killedAt map[int]time.Time
	seen     map[string]*memberHistory
	// engagements are every engagement of a spread cluster, in the order
	// reported; frozen the windows each SIGSTOPped process was stopped
	// (to is zero while it is). mu guards them.
	engagements []*engagement
	frozen      map[int][]window
}

// memberHistory is what a member's status reports ever said.
type memberHistory struct {
	// held is the most buckets it held at once (serving, syncing or
	// draining); members every member it counted live; refused whether it
	// was ever refused.
	held    int
	members map[string]bool
	refused bool
}

func newReferee(t *testing.T) *referee {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &referee{url: "http://" + l.Addr().String(), spans: map[int]map[int64]*span{}, status: map[string]report.Status{}, killedAt: map[int]time.Time{},
		seen: map[string]*memberHistory{}, frozen: map[int][]window{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /enter", func(w http.ResponseWriter, req *http.Request) {
		var c report.Enter
		if decode(w, req, &c) {
			r.enter(c)
		}
	})
	mux.HandleFunc("POST /exit", func(w http.ResponseWriter, req *http.Request) {
		var c report.Exit
		if decode(w, req, &c) {
			r.exit(c)
		}
	})
	mux.HandleFunc("POST /status", func(w http.ResponseWriter, req *http.Request) {
		var c report.Status
		if decode(w, req, &c) {
			r.report(c)
		}
	})
	mux.HandleFunc("POST /engagement", func(w http.ResponseWriter, req *http.Request) {
		var c report.Engagement
		if decode(w, req, &c) {
			r.engage(c)
		}
	})
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func decode(w http.ResponseWriter, req *http.Request, into any) bool {
	if err := json.NewDecoder(req.Body).Decode(into); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// report records member status c.
func (r *referee) report(c report.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.At > r.status[c.Member].At {
		r.status[c.Member] = c
	}
	h := r.seen[c.Member]
	if h == nil {
		h = &memberHistory{members: map[string]bool{}}
		r.seen[c.Member] = h
	}
	h.held = max(h.held, len(c.Serving)+len(c.Syncing)+len(c.Draining))
	for _, m := range c.Members {
		h.members[m] = true
	}
	h.refused = h.refused || c.Refused != ""
}

// history returns what member's reports ever said.
func (r *referee) history(member string) memberHistory {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.seen[member]
	if h == nil {
		return memberHistory{}
	}
	return memberHistory{held: h.held, members: maps.Clone(h.members), refused: h.refused}
}

// eachOf calls f with each reconcile of member's processes, under r.mu.
func (r *referee) eachOf(member string, f func(*span)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, byID := range r.spans {
		for _, s := range byID {
			if strings.HasPrefix(s.member, member+" (") {
				f(s)
			}
		}
	}
}

// reconciledBy counts the reconciles member's processes entered.
func (r *referee) reconciledBy(member string) int {
	n := 0
	r.eachOf(member, func(*span) { n++ })
	return n
}

// openOf counts member's reconciles entered and not exited.
func (r *referee) openOf(member string) int {
	n := 0
	r.eachOf(member, func(s *span) {
		if s.outcome == outcomeOpen {
			n++
		}
	})
	return n
}

// freshOf counts member's reconciles in flight that entered within d.
func (r *referee) freshOf(member string, d time.Duration) int {
	n := 0
	r.eachOf(member, func(s *span) {
		if s.outcome == outcomeOpen && time.Since(s.from) < d {
			n++
		}
	})
	return n
}

// outcomesOf counts member's reconciles by outcome.
func (r *referee) outcomesOf(member string) map[string]int {
	out := map[string]int{}
	r.eachOf(member, func(s *span) { out[s.outcome]++ })
	return out
}

func (r *referee) enter(c report.Enter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spans[c.Process] == nil {
		r.spans[c.Process] = map[int64]*span{}
	}
	s := &span{member: fmt.Sprintf("%s (pid %d)", c.Member, c.Process), key: c.Key, from: time.Unix(0, c.At), outcome: outcomeOpen, value: -1}
	if at, ok := r.killedAt[c.Process]; ok {
		s.to, s.outcome = at, outcomeKilled // sent before the kill, read after
	}
	r.spans[c.Process][c.ID] = s
}

func (r *referee) exit(c report.Exit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.spans[c.Process][c.ID]
	if s == nil || s.outcome != outcomeOpen {
		return // closed when the member was killed: it cannot exit afterwards
	}
	s.to, s.outcome = time.Unix(0, c.End), c.Outcome
	s.readRV, _ = strconv.ParseInt(c.ReadRV, 10, 64)
	s.writeRV, _ = strconv.ParseInt(c.WriteRV, 10, 64)
	if v, err := strconv.Atoi(c.Value); err == nil {
		s.value = v
	}
}

// reconciledAt returns, for each object name, the ends of its reconciles
// that wrote or confirmed a value, with the value, in order of their ends.
func (r *referee) reconciledAt() map[string][]seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]seen{}
	for _, byID := range r.spans {
		for _, s := range byID {
			if s.outcome == report.Written || s.outcome == report.Unchanged {
				out[s.key] = append(out[s.key], seen{at: s.to, value: s.value})
			}
		}
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b seen) int { return a.at.Compare(b.at) })
	}
	return out
}

// seen is a reconcile that wrote or confirmed value, ending at at.
type seen struct {
	at    time.Time
	value int
}

// slowest returns the longest time from one of changes, made in [from,
// to), to the end of the first reconcile that wrote or confirmed its value
// or a later one; with none, 0.
func slowest(changes []change, done map[string][]seen, from, to time.Time) time.Duration {
	var worst time.Duration
	for _, c := range changes {
		if c.at.Before(from) || !c.at.Before(to) {
			continue
		}
		for _, s := range done[c.name] {
			if s.value >= c.value && s.at.After(c.at) {
				worst = max(worst, s.at.Sub(c.at))
				break
			}
		}
	}
	return worst
}

// killed closes the open reconciles of process pid, SIGKILLed at at: they
// ran until then, and count as accepted writes. Its engagements end then
// too.
func (r *referee) killed(pid int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killedAt[pid] = at
	for _, s := range r.spans[pid] {
		if s.outcome == outcomeOpen {
			s.to, s.outcome = at, outcomeKilled
		}
	}
	for _, e := range r.engagements {
		if e.pid == pid && e.to.IsZero() {
			e.to = at
		}
	}
}

// latest returns member's latest status report, and whether there is one.
func (r *referee) latest(member string) (report.Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.status[member]
	return s, ok
}

// verdict sorts every pair of reconciles of one key by two members that
// were running at once.
type verdict struct {
	reconciles int
	outcomes   map[string]int
	// overlaps: both writes accepted, and neither member's read saw the
	// other's write. These must be 0 on a ring.
	overlaps int
	// ordered: both writes accepted, at once by the clock, but the server
	// orders them: one member read the object at or after the other's
	// write (a write sent before its member froze, answered after it
	// thawed).
	ordered int
	// fenced: one of the two writes was refused by the fence (a member
	// frozen past its lease, thawed mid-reconcile).
	fenced int
	// other: at once, but at most one wrote (the other found nothing to
	// write, was cancelled or failed).
	other int
	// examples are a few overlaps, for the failure message.
	examples []string
	// open counts reconciles entered and never exited.
	open int
	// stale counts writes that landed over another member's later look at
	// the object: a write accepted at writeRV that read readRV, while
	// another member read or wrote the object at a version in between. A
	// write conditional on the version it read (a precondition) cannot:
	// nothing changed the object between that version and its own.
	stale         int
	staleExamples []string
}

// judge computes the verdict over every reconcile reported so far.
func (r *referee) judge() verdict {
	r.mu.Lock()
	byKey := map[string][]*span{}
	v := verdict{outcomes: map[string]int{}}
	for _, ms := range r.spans {
		for _, s := range ms {
			c := *s
			if c.outcome == outcomeOpen {
				v.open++
				c.to = time.Now()
			}
			v.reconciles++
			v.outcomes[c.outcome]++
			byKey[c.key] = append(byKey[c.key], &c)
		}
	}
	r.mu.Unlock()
	for _, spans := range byKey {
		v.stale += staleWrites(spans, &v.staleExamples)
		sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if !b.from.Before(a.to) {
					break // sorted by start: no later span meets a
				}
				if a.member == b.member {
					continue
				}
				switch {
				case a.outcome == report.Fenced || b.outcome == report.Fenced:
					v.fenced++
				case !a.accepted() || !b.accepted():
					v.other++
				case serverOrdered(a, b) || serverOrdered(b, a):
					v.ordered++
				default:
					v.overlaps++
					if len(v.examples) < 5 {
						v.examples = append(v.examples, fmt.Sprintf("%s: %s %s %v–%v and %s %s %v–%v",
							a.key, a.member, a.outcome, a.from.Format("15:04:05.000"), a.to.Format("15:04:05.000"),
							b.member, b.outcome, b.from.Format("15:04:05.000"), b.to.Format("15:04:05.000")))
					}
				}
			}
		}
	}
	return v
}

// staleWrites counts the writes among spans (the reconciles of one key)
// that landed over another member's later look at the object (see
// verdict.stale), and adds a few to examples.
func staleWrites(spans []*span, examples *[]string) int {
	n := 0
	for _, a := range spans {
		if a.outcome != report.Written || a.readRV == 0 || a.writeRV == 0 {
			continue
		}
	others:
		for _, b := range spans {
			if b.member == a.member {
				continue
			}
			for _, x := range []int64{b.readRV, b.writeRV} {
				if x > a.readRV && x < a.writeRV {
					n++
					if len(*examples) < 5 {
						*examples = append(*examples, fmt.Sprintf("%s: %s read %d and wrote %d, over %s's look at %d",
							a.key, a.member, a.readRV, a.writeRV, b.member, x))
					}
					break others
				}
			}
		}
	}
	return n
}

// serverOrdered reports whether a's write was applied before b read the
// object: b read it at a resourceVersion at or past a's write. One etcd
// orders every write, so resourceVersions of one object compare.
func serverOrdered(a, b *span) bool {
	return a.writeRV != 0 && b.readRV != 0 && b.readRV >= a.writeRV
}

// served is the ring as the live members last reported it: how many
// buckets each serves, and whether every one of buckets is served by
// exactly one of them. Reports older than since do not count.
func (r *referee) served(live []string, buckets int, since time.Time) (counts []int, balanced bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make([]int, buckets)
	fresh := true
	for _, m := range live {
		s, ok := r.status[m]
		if !ok || time.Unix(0, s.At).Before(since) {
			fresh = false
			counts = append(counts, -1)
			continue
		}
		counts = append(counts, len(s.Serving))
		for _, b := range s.Serving {
			if b >= 0 && b < buckets {
				seen[b]++
			}
		}
	}
	if !fresh || len(live) == 0 {
		return counts, false
	}
	lo, hi := buckets/len(live), (buckets+len(live)-1)/len(live)
	for _, n := range counts {
		if n < lo || n > hi {
			return counts, false
		}
	}
	return counts, !slices.ContainsFunc(seen, func(n int) bool { return n != 1 })
}

func TestRefereeSortsConcurrentReconciles(t *testing.T) {
	at := func(ms int) int64 { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	// rec is one reconcile of key k by process pid from..to ms, with its
	// outcome and the resourceVersions it read and wrote.
	type rec struct {
		pid             int
		from, to        int
		outcome         string
		readRV, writeRV string
	}
	for _, tc := range []struct {
		name string
		recs []rec
		kill int    // pid SIGKILLed at 50 ms, 0 for none
		want [5]int // overlaps, ordered, fenced, other, open
		// stale is how many writes landed over another member's look.
		stale int
	}{
		{"one after the other", []rec{{1, 0, 10, report.Written, "5", "6"}, {2, 10, 20, report.Written, "6", "7"}}, 0, [5]int{0, 0, 0, 0, 0}, 0},
		{"the same process twice at once", []rec{{1, 0, 10, report.Written, "5", "6"}, {1, 5, 20, report.Written, "5", "7"}}, 0, [5]int{0, 0, 0, 0, 0}, 0},
		{"both written at once", []rec{{1, 0, 10, report.Written, "5", "6"}, {2, 5, 20, report.Written, "5", "7"}}, 0, [5]int{1, 0, 0, 0, 0}, 1},
		{"at once, but the second read the first's write", []rec{{1, 0, 30, report.Written, "5", "6"}, {2, 10, 20, report.Written, "6", "7"}}, 0, [5]int{0, 1, 0, 0, 0}, 0},
		{"at once, one fenced", []rec{{1, 0, 30, report.Fenced, "5", ""}, {2, 10, 20, report.Written, "5", "6"}}, 0, [5]int{0, 0, 1, 0, 0}, 0},
		{"at once, one unchanged", []rec{{1, 0, 30, report.Unchanged, "5", ""}, {2, 10, 20, report.Written, "5", "6"}}, 0, [5]int{0, 0, 0, 1, 0}, 0},
		{"killed while open, another written meanwhile", []rec{{1, 0, -1, "", "", ""}, {2, 10, 20, report.Written, "5", "6"}}, 1, [5]int{1, 0, 0, 0, 0}, 0},
		{"killed while open, another written after", []rec{{1, 0, -1, "", "", ""}, {2, 60, 70, report.Written, "5", "6"}}, 1, [5]int{0, 0, 0, 0, 0}, 0},
		{"open", []rec{{1, 0, -1, "", "", ""}}, 0, [5]int{0, 0, 0, 0, 1}, 0},
		{"a late write over the next holder's write", []rec{{1, 0, 30, report.Written, "5", "9"}, {2, 40, 50, report.Written, "5", "7"}}, 0, [5]int{}, 1},
		{"a late write over the next holder's read", []rec{{1, 0, 30, report.Written, "5", "9"}, {2, 40, 50, report.Unchanged, "7", ""}}, 0, [5]int{}, 1},
		{"a late write refused (a precondition)", []rec{{1, 0, 30, report.Error, "5", ""}, {2, 40, 50, report.Written, "5", "7"}}, 0, [5]int{}, 0},
		{"a write after the other's, read after it", []rec{{1, 0, 10, report.Written, "5", "7"}, {2, 20, 30, report.Written, "7", "9"}}, 0, [5]int{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReferee(t)
			for i, c := range tc.recs {
				r.enter(report.Enter{Member: "m", Process: c.pid, ID: int64(i), Key: "k", At: at(c.from)})
				if c.to >= 0 {
					r.exit(report.Exit{Member: "m", Process: c.pid, ID: int64(i), Outcome: c.outcome, ReadRV: c.readRV, WriteRV: c.writeRV, End: at(c.to)})
				}
			}
			if tc.kill != 0 {
				r.killed(tc.kill, time.Unix(0, at(50)))
			}
			v := r.judge()
			got := [5]int{v.overlaps, v.ordered, v.fenced, v.other, v.open}
			if got != tc.want {
				t.Errorf("overlaps, ordered, fenced, other, open = %v, want %v (outcomes %v)", got, tc.want, v.outcomes)
			}
			if v.stale != tc.stale {
				t.Errorf("stale writes = %d, want %d (%v)", v.stale, tc.stale, v.staleExamples)
			}
		})
	}
}

func TestSlowestChange(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	changes := []change{
		{name: "a", value: 1, at: at(0)},   // confirmed at 100 ms
		{name: "b", value: 1, at: at(10)},  // its first reconcile read an older value; written at 510 ms
		{name: "c", value: 1, at: at(20)},  // superseded by value 2, written at 220 ms
		{name: "c", value: 2, at: at(30)},  //
		{name: "d", value: 1, at: at(900)}, // outside the window
	}
	done := map[string][]seen{
		"a": {{at: at(100), value: 1}},
		"b": {{at: at(50), value: 0}, {at: at(510), value: 1}},
		"c": {{at: at(220), value: 2}},
		"d": {{at: at(5000), value: 1}},
	}
	if got, want := slowest(changes, done, at(0), at(900)), 500*time.Millisecond; got != want {
		t.Fatalf("slowest = %v, want %v", got, want)
	}
}
