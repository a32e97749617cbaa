package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// sharded is the workload that runs the converge contender as the members
// of a sharding ring on the ConfigMaps of the configmaps workload.
const sharded = "sharded"

// ringLabel is the label converge puts on every Lease of a ring
// (framework's ringLabel), by which the driver deletes them.
const ringLabel = "converge.dev/ring"

// ShardedRun is one run of the sharded workload: Members processes of the
// converge contender started together in one ring (0: one process without
// a ring, the converge row of the configmaps workload).
type ShardedRun struct {
	Members int `json:"members"`
	Repeat  int `json:"repeat"`
	Objects int `json:"objects"`
	// ServerFilter: kube-apiserver had the ShardedListAndWatch feature
	// gate, so it filtered each bucket's list and watch itself.
	ServerFilter bool `json:"serverFilter"`

	SyncSeconds   float64 `json:"syncSeconds"`   // start to every object reported by some member
	SettleSeconds float64 `json:"settleSeconds"` // start to every bucket served, none syncing or draining
	// ConfigMapLists are the lists of ConfigMaps kube-apiserver served
	// from the start until the ring settled: LIST requests plus streaming
	// lists (watches with sendInitialEvents, which client-go's reflectors
	// send when the server supports them).
	ConfigMapLists float64 `json:"configMapLists"`
	// ConfigMapBytes are the bytes of ConfigMap LIST responses and watch
	// events kube-apiserver sent meanwhile (before compression).
	ConfigMapBytes float64     `json:"configMapBytes"`
	Missed         int         `json:"missed"`
	PerMember      []MemberRun `json:"perMember"`
}

// MemberRun is what one process of a sharded run used.
type MemberRun struct {
	Identity       string  `json:"identity"`
	Buckets        int     `json:"buckets"`        // served once the ring settled
	SyncCPUSeconds float64 `json:"syncCpuSeconds"` // when every object was reported
	CPUSeconds     float64 `json:"cpuSeconds"`     // at the end, before SIGTERM
	HeapBytes      float64 `json:"heapBytes"`      // after the ring settled, after a GC
	RSSBytes       float64 `json:"rssBytes"`       // after the ring settled
	// RSSAnonBytes and RSSFileBytes split RSSBytes: the process's own
	// memory (heap, stacks, the runtime's) and the pages of its binary it
	// touched (RssAnon and RssFile of /proc/<pid>/status).
	RSSAnonBytes float64 `json:"rssAnonBytes"`
	RSSFileBytes float64 `json:"rssFileBytes"`
	// Runtime holds runtimeMetrics of runtime/metrics, read just after
	// RSS (before the GC of HeapBytes): where the process's own memory
	// goes, and its goroutines and collections so far.
	Runtime map[string]float64 `json:"runtime,omitempty"`
}

// runtimeMetrics are the runtime/metrics a sharded run keeps per member.
var runtimeMetrics = []string{
	"/memory/classes/heap/objects:bytes",   // live and not yet swept
	"/memory/classes/heap/unused:bytes",    // in spans in use, between objects
	"/memory/classes/heap/free:bytes",      // free spans not returned to the OS
	"/memory/classes/heap/released:bytes",  // returned
	"/memory/classes/heap/stacks:bytes",    // goroutine stacks
	"/memory/classes/metadata/other:bytes", // the GC's own
	"/memory/classes/profiling/buckets:bytes",
	"/memory/classes/total:bytes",
	"/gc/heap/goal:bytes",
	"/gc/heap/allocs:bytes", // allocated since start
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
	"/sched/goroutines:goroutines",
}

// ringName names the ring of one run; its Leases are deleted before and
// after the run, so a run never meets an earlier run's members.
func ringName(members, repeat int) string {
	return fmt.Sprintf("bench-%d-r%d", members, repeat)
}

// runSharded runs members processes of the converge contender bin in one
// ring (none when members is 0), started together, until every object was
// reported by one of them and the ring settled; then reads their memory
// and stops them.
func runSharded(ctx context.Context, c *cluster, bin string, o runOpts, repeat, members int) (*ShardedRun, error) {
	ns := namespaceFor(workload.ConfigMaps)
	run := &ShardedRun{Members: members, Repeat: repeat, Objects: o.n, ServerFilter: o.serverFilter}
	ring := ringName(members, repeat)
	deleteRing := func() error {
		return c.cs.CoordinationV1().Leases(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: ringLabel + "=" + ring})
	}
	if members > 0 {
		if err := deleteRing(); err != nil {
			return nil, fmt.Errorf("delete the Leases of ring %s: %w", ring, err)
		}
		defer func() { _ = deleteRing() }()
	}

	t := newTracker(objectIndex(workload.ConfigMaps, o.n))
	before, err := c.scrapeRequests(ctx)
	if err != nil {
		return nil, err
	}
	n := max(members, 1)
	procs := make([]*member, 0, n)
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	dropFromPageCache(bin)
	start := time.Now()
	for i := range n {
		name := "converge"
		args := []string{"--kind=" + string(workload.ConfigMaps), "--kubeconfig=" + o.kubeconfig, "--workers=" + strconv.Itoa(o.workers)}
		if members > 0 {
			name = fmt.Sprintf("member-%d", i)
			args = append(args, "--ring="+ring, "--ring-namespace="+ns, "--identity="+name)
		}
		tag := fmt.Sprintf("%s-%d-%s-%d", sharded, members, name, repeat)
		var env []string
		if o.profileDir != "" {
			env = append(env, "BENCH_CPUPROFILE="+filepath.Join(o.profileDir, tag+".cpu.pprof"))
		}
		p, err := startMember(name, bin, args, env, filepath.Join(o.logDir, tag+".log"), t)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		run.PerMember = append(run.PerMember, MemberRun{Identity: name})
	}
	exited := make(chan *member, n)
	for _, p := range procs {
		go func() {
			<-p.exited
			exited <- p
		}()
	}

	select {
	case <-t.allSeen:
	case <-time.After(o.deadline + 2*time.Minute):
		seen, _ := t.seen()
		run.Missed = o.n - seen
	case p := <-exited:
		return nil, p.errorf("exited during start-up: %v", p.waitErr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for i, p := range procs {
		run.PerMember[i].SyncCPUSeconds, _ = cpuSeconds(p.pid())
	}
	_, last := t.seen()
	run.SyncSeconds = time.Unix(0, last).Sub(start).Seconds()

	// The ring settles once every member sees all the others and every
	// bucket is served by one of them, none still listing or handing over.
	if members > 0 {
		settled, err := settle(ctx, procs, o.deadline+time.Minute)
		if err != nil {
			return nil, err
		}
		run.SettleSeconds = time.Since(start).Seconds()
		for i := range procs {
			run.PerMember[i].Buckets = settled[i]
		}
	} else {
		run.SettleSeconds = run.SyncSeconds
	}
	after, err := c.scrapeRequests(ctx)
	if err != nil {
		return nil, err
	}
	run.ConfigMapLists = after.byResource["configmaps LIST"] - before.byResource["configmaps LIST"] +
		after.watchLists["configmaps"] - before.watchLists["configmaps"]
	run.ConfigMapBytes = after.sentBytes["configmaps"] - before.sentBytes["configmaps"]

	// Memory, as in the other workloads: RSS one second after, then the
	// heap after a GC, one member after the other.
	time.Sleep(o.memAfter)
	for i, p := range procs {
		pm := &run.PerMember[i]
		if st, err := procStatusFields(p.pid()); err == nil {
			pm.RSSBytes, pm.RSSAnonBytes, pm.RSSFileBytes = float64(st["VmRSS"]), float64(st["RssAnon"]), float64(st["RssFile"])
		}
		rt, err := p.runtimeMetrics()
		if err != nil {
			return nil, err
		}
		pm.Runtime = map[string]float64{}
		for _, name := range runtimeMetrics {
			pm.Runtime[name] = rt[name]
		}
	}
	for i, p := range procs {
		m, err := p.memory()
		if err != nil {
			return nil, err
		}
		run.PerMember[i].HeapBytes = float64(m.heapAlloc)
		if o.profileDir != "" {
			p.heapProfile(filepath.Join(o.profileDir, fmt.Sprintf("%s-%d-%s-%d.heap.pprof", sharded, members, p.name, repeat)))
		}
	}
	for i, p := range procs {
		run.PerMember[i].CPUSeconds, _ = cpuSeconds(p.pid())
	}
	for _, p := range procs {
		p.terminate()
	}
	for _, p := range procs {
		p.wait(time.Minute)
	}
	procs = nil
	return run, nil
}

// settle polls the members' status until the ring has settled: each sees
// len(procs) members, none is syncing or draining a bucket, and together
// they serve every bucket. It returns the buckets each serves.
func settle(ctx context.Context, procs []*member, timeout time.Duration) ([]int, error) {
	deadline := time.Now().Add(timeout)
	for {
		serving := make([]int, len(procs))
		total, buckets, ok := 0, 0, true
		for i, p := range procs {
			st, err := p.status()
			if err != nil {
				return nil, err
			}
			serving[i], _ = strconv.Atoi(st["serving"])
			buckets, _ = strconv.Atoi(st["buckets"])
			total += serving[i]
			if st["syncing"] != "0" || st["draining"] != "0" || st["members"] != strconv.Itoa(len(procs)) {
				ok = false
			}
		}
		if ok && buckets > 0 && total == buckets {
			return serving, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("sharded: the ring of %d did not settle within %v (serving %v of %d)", len(procs), timeout, serving, buckets)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
