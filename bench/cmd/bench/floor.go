package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// FloorRun is one measure of the floor of the configmaps workload: the
// driver itself lists the N ConfigMaps once, as protobuf, and decodes them
// into a ConfigMapList. No informer, no queue, no handler: the least work
// any controller does to have seen every object, on the same machine.
type FloorRun struct {
	Repeat     int     `json:"repeat"`
	Objects    int     `json:"objects"`
	Seconds    float64 `json:"seconds"`    // the request sent to the list decoded
	CPUSeconds float64 `json:"cpuSeconds"` // the driver's user+system CPU meanwhile
}

// floor lists the n ConfigMaps of the configmaps workload with a new
// protobuf client (its connection made as part of the measure, as a
// contender's is) and returns what that took.
func floor(ctx context.Context, cfg *rest.Config, n, repeat int) (FloorRun, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "converge-bench-floor"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	// Another Dial makes the transport its own, not the driver's shared
	// one: the floor pays for its TLS handshake.
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return FloorRun{}, err
	}
	cpu0 := selfCPU()
	start := time.Now()
	list, err := cs.CoreV1().ConfigMaps(namespaceFor(workload.ConfigMaps)).List(ctx, metav1.ListOptions{})
	d := time.Since(start)
	cpu := selfCPU() - cpu0
	if err != nil {
		return FloorRun{}, fmt.Errorf("floor: list ConfigMaps: %w", err)
	}
	if len(list.Items) != n {
		return FloorRun{}, fmt.Errorf("floor: listed %d ConfigMaps, want %d", len(list.Items), n)
	}
	return FloorRun{Repeat: repeat, Objects: n, Seconds: d.Seconds(), CPUSeconds: cpu}, nil
}

// selfCPU is the driver's user plus system CPU time so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// floorSummary is the medians of the floor's runs, and each contender's
// multiples of it.
type floorSummary struct {
	Objects    int        `json:"objects"`
	Seconds    float64    `json:"seconds"`
	CPUSeconds float64    `json:"cpuSeconds"`
	Runs       []FloorRun `json:"runs"`
	// Multiples holds, by contender and then "sync" or "syncCpu", the
	// median over repeats of the contender's figure divided by the floor
	// measured just before it, in the same repeat: a slow moment of the
	// machine slows both alike.
	Multiples map[string]map[string]float64 `json:"multiples"`
}

func summarizeFloor(runs []FloorRun, results []*Result) *floorSummary {
	if len(runs) == 0 {
		return nil
	}
	s := &floorSummary{Objects: runs[0].Objects, Runs: runs, Multiples: map[string]map[string]float64{}}
	var secs, cpu []float64
	byRepeat := map[int]FloorRun{}
	for _, r := range runs {
		secs, cpu = append(secs, r.Seconds), append(cpu, r.CPUSeconds)
		byRepeat[r.Repeat] = r
	}
	s.Seconds, s.CPUSeconds = median(secs), median(cpu)
	multiples := map[string]map[string][]float64{}
	for _, r := range results {
		f, ok := byRepeat[r.Repeat]
		if r.Workload != string(workload.ConfigMaps) || !ok {
			continue
		}
		if multiples[r.Contender] == nil {
			multiples[r.Contender] = map[string][]float64{}
		}
		m := multiples[r.Contender]
		m["sync"] = append(m["sync"], ratio(r.SyncSeconds, f.Seconds))
		m["syncCpu"] = append(m["syncCpu"], ratio(r.SyncCPUSeconds, f.CPUSeconds))
	}
	for c, m := range multiples {
		s.Multiples[c] = map[string]float64{"sync": median(m["sync"]), "syncCpu": median(m["syncCpu"])}
	}
	return s
}

// renderFloor renders the floor of the configmaps workload and every
// contender's time to sync and CPU to sync as multiples of it.
func renderFloor(s *Summary) string {
	f := s.Floor
	w := string(workload.ConfigMaps)
	var b strings.Builder
	fmt.Fprintf(&b, "\n#### %s: the floor\n\n", w)
	fmt.Fprintf(&b, "The driver's own LIST of the %d ConfigMaps, as protobuf over a new connection, decoded once into a ConfigMapList: no informer, no queue, no handler (median of %d). ", f.Objects, len(f.Runs))
	b.WriteString("Its CPU is the driver's only; the contenders' include their start-up. ")
	b.WriteString("A multiple of the floor is the median over repeats of each run's figure divided by the floor measured just before it, in the same repeat.\n\n| | floor |")
	for _, n := range s.Order {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("--:|", len(s.Order)+1) + "\n")
	row := func(label, key string, floor float64) {
		fmt.Fprintf(&b, "| %s | %.2f |", label, floor)
		for _, n := range s.Order {
			fmt.Fprintf(&b, " %.2f |", s.Medians[w][n][key])
		}
		fmt.Fprintf(&b, "\n| %s ÷ floor | 1× |", label)
		for _, n := range s.Order {
			m, ok := f.Multiples[n][key]
			if !ok {
				m = ratio(s.Medians[w][n][key], floor)
			}
			fmt.Fprintf(&b, " %.1f× |", m)
		}
		b.WriteString("\n")
	}
	row("time to all reconciled (s)", "sync", f.Seconds)
	row("CPU to sync (s)", "syncCpu", f.CPUSeconds)
	return b.String()
}
