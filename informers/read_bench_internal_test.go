package informers

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// listOnly makes the reflector list and then watch, so a fake watch serves.
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// populatedPods returns an Informer holding n pods spread over namespaces
// ns-0 … ns-(nsCount-1), filled from a fake list: no API server.
func populatedPods(tb testing.TB, n, nsCount int) *Informer[*corev1.Pod] {
	tb.Helper()
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range n {
		p := replica(i)
		p.Namespace = fmt.Sprintf("ns-%d", i%nsCount)
		list.Items = append(list.Items, *p)
	}
	lw := listOnly{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return list, nil },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tb.Fatal("fake informer did not sync")
	}
	c := &Cache{marks: map[writeKey]*writeMark{}}
	e := &entry{key: informerKey{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}}, desc: "v1 Pod", cache: c, informer: inf}
	return &Informer[*corev1.Pod]{e: e}
}

func TestPopulatedInformerReads(t *testing.T) {
	inf := populatedPods(t, 100, 4)
	p, err := inf.Get(t.Context(), types.NamespacedName{Namespace: "ns-1", Name: "web-5"})
	if err != nil || p.Name != "web-5" {
		t.Fatalf("Get = %v, %v", p, err)
	}
	pods, err := inf.List(t.Context(), InNamespace("ns-2"))
	if err != nil || len(pods) != 25 {
		t.Fatalf("List = %d pods, %v; want 25", len(pods), err)
	}
}

// BenchmarkCacheGet reads one pod of 5,000 by namespace and name: converge's
// Get (shared object), client-go's lister, and a Get that deep-copies as
// controller-runtime's cache reader does.
func BenchmarkCacheGet(b *testing.B) {
	inf := populatedPods(b, 5000, 5)
	ctx := context.Background()
	lister := listersv1.NewPodLister(inf.e.informer.GetIndexer())
	names := make([][2]string, 5000)
	for i := range names {
		names[i] = [2]string{fmt.Sprintf("ns-%d", i%5), fmt.Sprintf("web-%d", i)}
	}
	b.Run("converge", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := names[i%len(names)]
			if _, err := inf.Get(ctx, types.NamespacedName{Namespace: k[0], Name: k[1]}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("client-go-lister", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := names[i%len(names)]
			if _, err := lister.Pods(k[0]).Get(k[1]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("deep-copy", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := names[i%len(names)]
			p, err := lister.Pods(k[0]).Get(k[1])
			if err != nil {
				b.Fatal(err)
			}
			_ = p.DeepCopy()
			i++
		}
	})
}

// BenchmarkCacheList lists the 1,000 pods of one namespace of 5,000.
func BenchmarkCacheList(b *testing.B) {
	inf := populatedPods(b, 5000, 5)
	ctx := context.Background()
	lister := listersv1.NewPodLister(inf.e.informer.GetIndexer())
	b.Run("converge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if pods, _ := inf.List(ctx, InNamespace("ns-3")); len(pods) != 1000 {
				b.Fatal(len(pods))
			}
		}
	})
	b.Run("client-go-lister", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if pods, _ := lister.Pods("ns-3").List(labels.Everything()); len(pods) != 1000 {
				b.Fatal(len(pods))
			}
		}
	})
}
