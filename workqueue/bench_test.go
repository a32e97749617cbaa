package workqueue_test

import (
	"sync/atomic"
	"testing"

	clientgo "k8s.io/client-go/util/workqueue"

	"github.com/converge-dev/converge/workqueue"
)

// benchQueue is what the benchmarks drive, so that the priority layer can be
// compared with client-go's queues on the same work.
type benchQueue interface {
	Add(int)
	AddReplay(int)
	Get() (int, bool)
	Done(int)
	ShutDown()
}

// clientgoQueue adapts a client-go queue; it has one class, so
// AddReplay is Add.
type clientgoQueue struct{ clientgo.TypedInterface[int] }

func (q clientgoQueue) AddReplay(k int) { q.Add(k) }

var benchQueues = []struct {
	name string
	new  func() benchQueue
}{
	// The bare queue: no delaying goroutine, no rate limiter.
	{"client-go-Typed", func() benchQueue { return clientgoQueue{clientgo.NewTyped[int]()} }},
	// The same layers as Queue, without priorities.
	{"client-go-RateLimiting", func() benchQueue {
		return clientgoQueue{clientgo.NewTypedRateLimitingQueue(clientgo.DefaultTypedControllerRateLimiter[int]())}
	}},
	{"converge", func() benchQueue { return workqueue.New(workqueue.Options[int]{}) }},
	// ReplayDelay < 0: one FIFO, the clock is never read.
	{"converge-FIFO", func() benchQueue { return workqueue.New(workqueue.Options[int]{ReplayDelay: -1}) }},
	// Keys spread over 10 and 100 flows (key % flows), served round-robin.
	{"converge-flows=10", func() benchQueue { return flowQueue(10) }},
	{"converge-flows=100", func() benchQueue { return flowQueue(100) }},
}

// BenchmarkRoundTrip is one Add, Get and Done on one goroutine.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bq := range benchQueues {
		b.Run(bq.name, func(b *testing.B) {
			q := bq.new()
			defer q.ShutDown()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q.Add(i & 1023)
				k, _ := q.Get()
				q.Done(k)
				i++
			}
		})
	}
}

// BenchmarkRoundTripParallel is BenchmarkRoundTrip on GOMAXPROCS goroutines
// sharing one queue, with distinct keys.
func BenchmarkRoundTripParallel(b *testing.B) {
	for _, bq := range benchQueues {
		b.Run(bq.name, func(b *testing.B) {
			q := bq.new()
			defer q.ShutDown()
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				base := int(next.Add(1)) << 32
				i := 0
				for pb.Next() {
					q.Add(base + i&1023)
					k, _ := q.Get()
					q.Done(k)
					i++
				}
			})
		})
	}
}

// BenchmarkReplayMix queues batches in which one key in four is a
// replay key, then drains them: the cost per key of both fifos, the
// replay index and the clock. For client-go every add is an Add.
func BenchmarkReplayMix(b *testing.B) {
	for _, batch := range []int{64, 4096} {
		for _, bq := range benchQueues {
			b.Run(bq.name+"/batch="+itoa(batch), func(b *testing.B) {
				q := bq.new()
				defer q.ShutDown()
				b.ReportAllocs()
				for b.Loop() {
					for k := range batch {
						if k%4 == 0 {
							q.AddReplay(k)
						} else {
							q.Add(k)
						}
					}
					finishN(q, batch)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
			})
		}
	}
}

// BenchmarkPromote queues replay keys and promotes half of them with
// Add before draining.
func BenchmarkPromote(b *testing.B) {
	const batch = 256
	q := workqueue.New(workqueue.Options[int]{})
	defer q.ShutDown()
	b.ReportAllocs()
	for b.Loop() {
		for k := range batch {
			q.AddReplay(k)
		}
		for k := 0; k < batch; k += 2 {
			q.Add(k)
		}
		finishN(q, batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
}

// finishN gets and finishes n keys.
func finishN(q interface {
	Get() (int, bool)
	Done(int)
}, n int) {
	for range n {
		k, _ := q.Get()
		q.Done(k)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for ; n > 0; n /= 10 {
		i--
		buf[i] = byte('0' + n%10)
	}
	return string(buf[i:])
}

// flowQueue returns a queue whose keys are spread over n flows.
func flowQueue(n int) *workqueue.Queue[int] {
	names := make([]string, n)
	for i := range names {
		names[i] = "flow-" + itoa(i)
	}
	return workqueue.New(workqueue.Options[int]{Flow: func(k int) string { return names[k%n] }})
}

// BenchmarkFlood queues a backlog of 10,000 keys in one flow, then one key
// in another, and reports how many Gets it takes to hand that key out:
// the harm a flood does to a quiet flow without flows (the whole backlog),
// and its absence with them (two Gets).
func BenchmarkFlood(b *testing.B) {
	const backlog = 10000
	const quiet = backlog // the quiet key; the flood is 0..backlog-1
	for _, flows := range []bool{false, true} {
		name := "flows=off"
		opts := workqueue.Options[int]{}
		if flows {
			name = "flows=on"
			opts.Flow = func(k int) string {
				if k == quiet {
					return "quiet"
				}
				return "flood"
			}
		}
		b.Run(name, func(b *testing.B) {
			q := workqueue.New(opts)
			defer q.ShutDown()
			gets := 0
			for b.Loop() {
				for k := range backlog {
					q.Add(k)
				}
				q.Add(quiet)
				for n := 1; ; n++ {
					k, _ := q.Get()
					q.Done(k)
					if k == quiet {
						gets = n
						break
					}
				}
				b.StopTimer()
				for q.Len() > 0 {
					k, _ := q.Get()
					q.Done(k)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(gets), "gets-to-quiet-key")
		})
	}
}
