package workqueue

import "k8s.io/utils/clock"

// NewWithClock is New with the clock replaced, for tests on a fake clock.
func NewWithClock[K comparable](opts Options[K], c clock.WithTicker) *Queue[K] {
	return newQueue(opts, c)
}

// PendingPriorities returns how many keys have a priority waiting for Done
// (re-added while held by a worker). It must be zero when no worker holds a
// key: anything else is a leak.
func PendingPriorities[K comparable](q *Queue[K]) int {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return len(q.core.hand.pending)
}

// TrackedCauses returns how many keys have a cause recorded: queued keys,
// and keys handed to the delaying queue and not yet added. It must be zero
// once the queue is drained and nothing is delayed: anything else is a leak.
func TrackedCauses[K comparable](q *Queue[K]) int {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return len(q.core.hand.causes) + len(q.core.hand.delayed)
}
