package introspect

import (
	"fmt"
	"math"
	"runtime/metrics"

	"github.com/converge-dev/converge/informers"
)

// Memory is the process's heap and the part of it the cache's estimates
// account for (see informers.InformerStats.Bytes).
type Memory struct {
	// LiveHeapBytes is the heap the last garbage collection found live
	// (runtime/metrics /gc/heap/live:bytes); before the first collection,
	// the heap's objects, live or not (/memory/classes/heap/objects:bytes).
	LiveHeapBytes int64 `json:"liveHeapBytes"`
	// CacheBytes is the sum of the informers' estimates and SharedBytes.
	CacheBytes int64 `json:"cacheBytes"`
	// SharedBytes estimates the values cached objects share, counted once
	// (informers.Cache.SharedBytes).
	SharedBytes int64 `json:"sharedBytes"`
	// UnattributedBytes is LiveHeapBytes less CacheBytes, at least 0: the
	// rest of the process (queues, histories, clients, buffers, code's
	// own data), and the estimates' error.
	UnattributedBytes int64 `json:"unattributedBytes"`
	// GOGC is the garbage collector's percent (-1 when off), and
	// MemoryLimitBytes its soft memory limit (math.MaxInt64 for none).
	GOGC             int64 `json:"gogc"`
	MemoryLimitBytes int64 `json:"memoryLimitBytes"`
	// Kinds are the cache's totals per kind, the largest first.
	Kinds []KindMemory `json:"kinds"`
}

// KindMemory is what the cache holds of one kind, over its informers.
type KindMemory struct {
	Kind      Kind  `json:"kind"`
	Informers int   `json:"informers"`
	Objects   int   `json:"objects"`
	Bytes     int64 `json:"bytes"`
	// StartedByRead counts the informers of the kind a read started
	// (informers.InformerStats.StartedByRead).
	StartedByRead int `json:"startedByRead,omitempty"`
}

// MemoryOf totals stats per kind and reads the process's heap from
// runtime/metrics; shared is the cache's SharedBytes.
func MemoryOf(stats []informers.InformerStats, shared int64) Memory {
	m := Memory{SharedBytes: shared, CacheBytes: shared + informers.Total(stats).Bytes, Kinds: KindsOf(stats)}
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(samples)
	for _, i := range []int{0, 3} {
		if m.LiveHeapBytes == 0 && samples[i].Value.Kind() == metrics.KindUint64 {
			m.LiveHeapBytes = int64(min(samples[i].Value.Uint64(), math.MaxInt64))
		}
	}
	if samples[1].Value.Kind() == metrics.KindUint64 {
		m.GOGC = int64(int32(samples[1].Value.Uint64())) // -1, off, as a uint64
	}
	if samples[2].Value.Kind() == metrics.KindUint64 {
		m.MemoryLimitBytes = int64(min(samples[2].Value.Uint64(), math.MaxInt64))
	}
	m.UnattributedBytes = max(m.LiveHeapBytes-m.CacheBytes, 0)
	return m
}

// KindsOf is informers.ByKind of stats, as the debug endpoint spells it.
func KindsOf(stats []informers.InformerStats) []KindMemory {
	kinds := []KindMemory{}
	for _, k := range informers.ByKind(stats) {
		kinds = append(kinds, KindMemory{Kind: KindOf(k.Kind), Informers: k.Informers, Objects: k.Objects, Bytes: k.Bytes, StartedByRead: k.StartedByRead})
	}
	return kinds
}

// bytesText spells n bytes in binary units: "512 B", "1.5 KiB", "12.0 MiB".
func bytesText(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%.1f %s", f, unit)
}
