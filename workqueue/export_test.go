package workqueue

import (
	"reflect"

	"k8s.io/utils/clock"
)

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

// MapIdentities returns the identities of the core's keys and delayed
// maps, which change only when a map is made anew.
func MapIdentities[K comparable](q *Queue[K]) (keys, delayed uintptr) {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return reflect.ValueOf(q.core.keys).Pointer(), reflect.ValueOf(q.core.delayed).Pointer()
}

// RemakeAt is remakeAt.
const RemakeAt = remakeAt
