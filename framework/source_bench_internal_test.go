package framework

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// countingQueue counts the requests a source queues.
type countingQueue struct{ adds int }

func (q *countingQueue) Add(reconcile.Request)                     { q.adds++ }
func (q *countingQueue) AddReplay(reconcile.Request)               { q.adds++ }
func (q *countingQueue) AddAfter(reconcile.Request, time.Duration) { q.adds++ }

// The deliver functions hand an event to h as an informer does: client-go
// carries objects as any, and the informer's handle turns them into T.
func deliverAdd[T object.Object](h informers.Listener[T], obj any) {
	if t, ok := obj.(T); ok {
		h.OnAdd(t, false)
	}
}

func deliverUpdate[T object.Object](h informers.Listener[T], oldObj, newObj any) {
	o, ok1 := oldObj.(T)
	n, ok2 := newObj.(T)
	if ok1 && ok2 {
		h.OnUpdate(o, n)
	}
}

func deliverDelete[T object.Object](h informers.Listener[T], obj any) {
	if t, ok := obj.(T); ok {
		h.OnDelete(t, false)
	}
}

// asListener is what an informer holds: the handler as an interface,
// converted once.
func asListener[T object.Object](h informers.ListenerFuncs[T]) informers.Listener[T] { return h }

// benchPod is a pod owned by the Deployment web, at resource version rv.
func benchPod(rv int) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "web-1", UID: types.UID("u1"), ResourceVersion: strconv.Itoa(rv),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d1", Controller: &yes}},
	}}
}

// BenchmarkSourceEvents measures the event path of a source, from the
// informer's untyped event to the queued request: an owned object's add and
// update, and a primary object's deletion that keeps a tombstone.
func BenchmarkSourceEvents(b *testing.B) {
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	target := func(q *countingQueue) *watchTarget {
		w := &watchTarget{owner: deployment, queue: q}
		w.ownerScope.Store(1)
		return w
	}
	ctx := context.Background()
	var sink *corev1.Pod

	b.Run("owned/add", func(b *testing.B) {
		q := &countingQueue{}
		h := asListener(benchSource(&kindSource[*corev1.Pod]{}, target(q), nil).listener(ctx))
		pod := benchPod(1)
		b.ReportAllocs()
		for b.Loop() {
			deliverAdd(h, pod)
		}
		if q.adds == 0 {
			b.Fatal("nothing queued")
		}
	})
	b.Run("owned/update", func(b *testing.B) {
		q := &countingQueue{}
		h := asListener(benchSource(&kindSource[*corev1.Pod]{}, target(q), nil).listener(ctx))
		oldPod, newPod := benchPod(1), benchPod(2)
		b.ReportAllocs()
		for b.Loop() {
			deliverUpdate(h, oldPod, newPod)
		}
		if q.adds == 0 {
			b.Fatal("nothing queued")
		}
	})
	b.Run("primary/delete", func(b *testing.B) {
		q := &countingQueue{}
		h := asListener(benchSource(&kindSource[*corev1.Pod]{self: true}, target(q), func(p *corev1.Pod) { sink = p }).listener(ctx))
		pod := benchPod(1)
		b.ReportAllocs()
		for b.Loop() {
			deliverDelete(h, pod)
		}
		if q.adds == 0 || sink != pod {
			b.Fatal("nothing queued or no tombstone kept")
		}
	})
}

// benchSource binds s to w without an informer; onDelete, if set, sees
// each deleted object.
func benchSource[C object.Object](s *kindSource[C], w *watchTarget, onDelete func(C)) *boundKind[C] {
	b := &boundKind[C]{kindSource: *s, w: w}
	if onDelete != nil {
		b.keepTombstones(onDelete)
	}
	return b
}
