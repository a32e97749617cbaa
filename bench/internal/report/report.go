// Package report is the channel from a contender to the benchmark driver,
// the same code in every contender so that reporting costs them all alike.
//
// Contender to driver, on standard output, one line each:
//
//	R <unix-nanos> <namespace>/<name> <resourceVersion> <gen>   a key was reconciled
//	M <HeapAlloc> <HeapInuse> <HeapSys> <Sys> <NumGC> <peaks>  reply to "mem"
//	H <path>                                                   reply to "heap <path>" and "cpuprofile [<path>]"
//	S <text>                                                   reply to "status"
//	X <name>=<value> ...                                       reply to "runtime"
//	Q <name>=<value> ...                                       reply to "reads <n>"
//
// Driver to contender, on standard input: "mem" (collect garbage, then
// report runtime.MemStats and the peaks of the first sync, see below),
// "syncdone" (every object was reported once: the first sync is over),
// "heap <path>" (write a heap profile), "cpuprofile <path>" (start a CPU
// profile into that file, unless one is running) and "cpuprofile" (stop the
// one so started),
// "status" (the text of the function given to SetStatus, "-" without one),
// "runtime" (every scalar of runtime/metrics, as it is: no GC first) and
// "reads <n>" (the read costs of the contender's cache, see SetReads).
//
// From Start until "syncdone", a goroutine reads runtime/metrics every
// 5 ms and keeps the largest heap objects (live and not yet swept garbage,
// /memory/classes/heap/objects:bytes), live heap as of the last GC
// (/gc/heap/live:bytes) and heap goal (/gc/heap/goal:bytes) it saw; "mem"
// appends them, the number of GCs by "syncdone" and the largest heap
// objects before the first Seen (the caches' sync alone, before the first
// reconcile), to its reply.
//
// Seen only sends a small struct on a buffered channel; one goroutine formats
// and writes the lines, flushing whenever the channel runs empty, so reports
// are batched under load and prompt when idle.
package report

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type record struct {
	at                int64
	ns, name, rv, gen string
	ctl               string // a control reply, written as is
}

var (
	ch      = make(chan record, 4096)
	done    = make(chan struct{})
	cpuProf *os.File
	// status answers "status"; set before Start.
	status func() string
)

// SetStatus makes f the answer to the driver's "status" request: one line
// of space-separated key=value fields. Call it before Start.
func SetStatus(f func() string) { status = f }

// Start begins reporting. With $BENCH_CPUPROFILE set it also records a CPU
// profile into that file until Stop.
func Start() {
	if p := os.Getenv("BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			cpuProf = f
		}
	}
	go write()
	go sample()
	go commands()
}

// Seen reports that the object namespace/name was reconciled at resource
// version rv, carrying gen.
func Seen(ns, name, rv, gen string) {
	if !reconciling.Load() {
		reconciling.Store(true)
	}
	ch <- record{at: time.Now().UnixNano(), ns: ns, name: name, rv: rv, gen: gen}
}

// Stop flushes what was reported and ends the CPU profile, if any.
func Stop() {
	close(ch)
	<-done
	if cpuProf != nil {
		pprof.StopCPUProfile()
		cpuProf.Close()
	}
}

// window is the CPU profile of "cpuprofile <path>", until "cpuprofile".
var window *os.File

// windowProfile starts (with a path) or stops (without) the profile of a
// window of the run the driver chooses, and returns the path, or "-".
func windowProfile(args []string) string {
	if len(args) == 0 {
		if window == nil {
			return "-"
		}
		pprof.StopCPUProfile()
		path := window.Name()
		window.Close()
		window = nil
		return path
	}
	if window != nil || cpuProf != nil {
		return "-"
	}
	f, err := os.Create(args[0])
	if err != nil {
		return "-"
	}
	if pprof.StartCPUProfile(f) != nil {
		f.Close()
		return "-"
	}
	window = f
	return args[0]
}

func write() {
	defer close(done)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	buf := make([]byte, 0, 256)
	put := func(r record) {
		if r.ctl != "" {
			w.WriteString(r.ctl)
			return
		}
		buf = append(buf[:0], 'R', ' ')
		buf = strconv.AppendInt(buf, r.at, 10)
		buf = append(buf, ' ')
		buf = append(buf, r.ns...)
		buf = append(buf, '/')
		buf = append(buf, r.name...)
		buf = append(buf, ' ')
		buf = append(buf, r.rv...)
		buf = append(buf, ' ')
		buf = append(buf, r.gen...)
		buf = append(buf, '\n')
		w.Write(buf)
	}
	for r := range ch {
		put(r)
	drain:
		for {
			select {
			case r, ok := <-ch:
				if !ok {
					break drain
				}
				put(r)
			default:
				break drain
			}
		}
		w.Flush()
	}
	w.Flush()
}

func commands() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "mem":
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			endSync() // a driver that sent no "syncdone": the sync is over by now
			<-sampled
			ch <- record{ctl: fmt.Sprintf("M %d %d %d %d %d %d %d %d %d %d\n", m.HeapAlloc, m.HeapInuse, m.HeapSys, m.Sys, m.NumGC,
				peak[0], peak[1], peak[2], peakGCs, peakBefore)}
		case "syncdone":
			endSync()
		case "heap":
			if len(f) > 1 {
				if fh, err := os.Create(f[1]); err == nil {
					runtime.GC()
					pprof.Lookup("heap").WriteTo(fh, 0)
					fh.Close()
				}
				ch <- record{ctl: "H " + f[1] + "\n"}
			}
		case "cpuprofile":
			ch <- record{ctl: "H " + windowProfile(f[1:]) + "\n"}
		case "reads":
			n := 0
			if len(f) > 1 {
				n, _ = strconv.Atoi(f[1])
			}
			ch <- record{ctl: measureReads(n) + "\n"}
		case "runtime":
			ch <- record{ctl: "X " + runtimeMetrics() + "\n"}
		case "status":
			text := "-"
			if status != nil {
				text = status()
			}
			ch <- record{ctl: "S " + text + "\n"}
		}
	}
}

// runtimeMetrics renders every scalar of runtime/metrics as name=value.
func runtimeMetrics() string {
	descs := metrics.All()
	samples := make([]metrics.Sample, len(descs))
	for i, d := range descs {
		samples[i].Name = d.Name
	}
	metrics.Read(samples)
	var b strings.Builder
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			fmt.Fprintf(&b, "%s=%d ", s.Name, s.Value.Uint64())
		case metrics.KindFloat64:
			fmt.Fprintf(&b, "%s=%g ", s.Name, s.Value.Float64())
		}
	}
	return strings.TrimSpace(b.String())
}

var (
	// syncDone is closed by "syncdone"; sampled once sample has stopped,
	// after which peak and peakGCs no longer change.
	syncDone, sampled = make(chan struct{}), make(chan struct{})
	peak              [3]uint64 // heap objects, live heap, heap goal
	peakGCs           uint64    // GC cycles completed by "syncdone"
	// peakBefore is the largest heap objects sampled before the first
	// Seen; reconciling is set by it.
	peakBefore  uint64
	reconciling atomic.Bool
	endSync     = sync.OnceFunc(func() { close(syncDone) })
)

// sample keeps the maxima of the heap during the first sync (see the
// package doc) until syncDone is closed.
func sample() {
	defer close(sampled)
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		metrics.Read(s)
		for i := range peak {
			if s[i].Value.Kind() == metrics.KindUint64 {
				peak[i] = max(peak[i], s[i].Value.Uint64())
			}
		}
		if !reconciling.Load() {
			peakBefore = peak[0]
		}
		select {
		case <-syncDone:
			peakGCs = s[3].Value.Uint64()
			return
		case <-tick.C:
		}
	}
}
