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

// This example gives each cluster of a fleet a flow: a backlog in one
// cluster does not delay another's keys, a cluster that cannot be reached
// is paused, and a cluster that leaves is dropped.
func ExampleOptions_flow() {
	type request struct{ cluster, name string }
	q := workqueue.New(workqueue.Options[request]{
		Flow:      func(r request) string { return r.cluster },
		FlowLimit: 3, // of 4 workers: one is always free for the other clusters
	})
	defer q.ShutDown()

	for _, name := range []string{"a", "b", "c"} {
		q.Add(request{"flood", name})
	}
	q.Add(request{"quiet", "x"})
	q.Add(request{"gone", "y"})
	q.Add(request{"down", "z"})
	q.PauseFlow("down")             // its keys wait, and run after ResumeFlow
	fmt.Println(q.DropFlow("gone")) // its keys are forgotten
	for range 4 {
		r, _ := q.Get()
		fmt.Println(r.cluster, r.name)
		q.Done(r)
	}
	fmt.Printf("%+v\n", q.Flows()[0])
	// Output:
	// 1
	// flood a
	// quiet x
	// flood b
	// flood c
	// {Flow:down Queued:1 Held:0 Paused:true WaitP50:0s WaitP99:0s}
}
