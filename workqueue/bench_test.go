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
					for range batch {
						k, _ := q.Get()
						q.Done(k)
					}
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
		for range batch {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
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
