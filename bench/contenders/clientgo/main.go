// Command clientgo is the benchmark's hand-written client-go contender: a
// SharedInformerFactory (for the custom resource, a typed REST client and
// informer, as client-gen and informer-gen would generate), a typed
// rate-limited workqueue of "namespace/name" keys, and workers that read the
// object from the lister. For the parents workload it applies children and
// status with server-side apply (apps.go).
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-dev/converge/bench/internal/report"
	"github.com/converge-dev/converge/bench/internal/workload"
)

func main() {
	kind := flag.String("kind", "configmaps", "workload: configmaps, pods or widgets")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	workers := flag.Int("workers", 4, "concurrent reconciles")
	flag.Parse()
	report.Start()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if workload.Kind(*kind) == workload.Parents {
		if err := runApps(ctx, cfg, cs, *workers); err != nil {
			log.Fatal(err)
		}
		report.Stop()
		return
	}
	factory := informers.NewSharedInformerFactory(cs, 0)

	var (
		inf cache.SharedIndexInformer
		get func(ns, name string) (metav1.Object, string, error)
	)
	switch workload.Kind(*kind) {
	case workload.ConfigMaps:
		i := factory.Core().V1().ConfigMaps()
		inf = i.Informer()
		lister := i.Lister()
		get = func(ns, name string) (metav1.Object, string, error) {
			cm, err := lister.ConfigMaps(ns).Get(name)
			if err != nil {
				return nil, "", err
			}
			return cm, workload.ConfigMapGen(cm), nil
		}
	case workload.Pods:
		i := factory.Core().V1().Pods()
		inf = i.Informer()
		lister := i.Lister()
		get = func(ns, name string) (metav1.Object, string, error) {
			p, err := lister.Pods(ns).Get(name)
			if err != nil {
				return nil, "", err
			}
			return p, workload.PodGen(p), nil
		}
	case workload.Widgets:
		inf, err = widgetInformer(cfg)
		if err != nil {
			log.Fatal(err)
		}
		indexer := inf.GetIndexer()
		get = func(ns, name string) (metav1.Object, string, error) {
			obj, ok, err := indexer.GetByKey(ns + "/" + name)
			if err != nil || !ok {
				return nil, "", err
			}
			w := obj.(*workload.Widget)
			return w, workload.WidgetGen(w), nil
		}
	default:
		log.Fatalf("unknown kind %q", *kind)
	}

	// The driver's "reads": Gets through the lister as a reconcile reads
	// (no copy), and a List of the namespace from the informer's index, as
	// a lister's List.
	report.SetReads(report.Reads{
		Key: func(i int) (string, string) { return workload.Key(workload.Kind(*kind), i) },
		Get: func(_ context.Context, ns, name string) error {
			_, _, err := get(ns, name)
			return err
		},
		List: func(_ context.Context, ns string) (int, error) {
			n := 0
			err := cache.ListAllByNamespace(inf.GetIndexer(), ns, labels.Everything(), func(any) { n++ })
			return n, err
		},
	})

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				queue.Add(key)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	factory.Start(ctx.Done())
	go inf.RunWithContext(ctx) // no-op for factory informers already running
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		log.Fatal("cache did not sync")
	}

	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				obj, gen, err := get(ns, name)
				if err != nil {
					queue.AddRateLimited(key)
				} else {
					if obj != nil {
						report.Seen(obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion(), gen)
					}
					queue.Forget(key)
				}
				queue.Done(key)
			}
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	factory.Shutdown()
	report.Stop()
}

// widgetInformer is what informer-gen generates for a custom resource: a
// list-watch on the typed REST client that client-gen generates (JSON), and
// a shared index informer with the namespace index.
func widgetInformer(cfg *rest.Config) (cache.SharedIndexInformer, error) {
	scheme := runtime.NewScheme()
	if err := workload.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &workload.WidgetGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			out := &workload.WidgetList{}
			err := rc.Get().Resource("widgets").VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return rc.Get().Resource("widgets").VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(lw, &workload.Widget{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	}), nil
}
