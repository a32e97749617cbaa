package workqueue_test

import (
	"errors"
	"fmt"
	"sync"

	"github.com/converge-dev/converge/workqueue"
)

// This example queues keys the way informer event handlers would, then
// drains them with one worker. Keys from the resync come after the real
// changes; a key added three times is processed once.
func Example() {
	q := workqueue.New(workqueue.Options[string]{Name: "example"}) // with a MetricsProvider, Name labels its workqueue_* metrics

	// Event handlers see only the Enqueuer.
	var handlers workqueue.Enqueuer[string] = q
	handlers.AddReplay("default/resynced") // from a periodic resync
	handlers.Add("default/changed")        // a real change
	handlers.Add("default/created")
	handlers.Add("default/changed") // already queued: processed once

	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			key, shutdown := q.Get()
			if shutdown {
				return
			}
			if err := reconcile(key); err != nil {
				q.AddRateLimited(key) // retry later, with backoff
			} else {
				q.Forget(key) // success: reset the key's backoff
			}
			q.Done(key) // always
		}
	})

	q.ShutDown() // no more adds; the worker still gets the queued keys, then shutdown
	wg.Wait()
	// Output:
	// reconcile default/changed
	// reconcile default/created
	// reconcile default/resynced
}

func reconcile(key string) error {
	fmt.Println("reconcile", key)
	if key == "" {
		return errors.New("empty key")
	}
	return nil
}
