package workqueue

import "k8s.io/utils/clock"

// NewWithClock is New with the clock replaced, for tests on a fake clock.
func NewWithClock[K comparable](opts Options[K], c clock.WithTicker) *Queue[K] {
	return newQueue(opts, c)
}

// TrackedCauses returns how many keys have a state or a cause recorded:
// queued keys, keys held by workers, and keys handed to the delaying queue
// and not yet added. It must be zero
// once the queue is drained and nothing is delayed: anything else is a leak.
func TrackedCauses[K comparable](q *Queue[K]) int {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return len(q.core.keys) + len(q.core.delayed)
}
