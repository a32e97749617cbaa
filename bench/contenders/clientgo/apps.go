package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-dev/converge/bench/internal/workload"
)

// fieldManager owns what this controller applies.
const fieldManager = "bench-clientgo"

// appController is a hand-written App controller: informers for Apps,
// ConfigMaps and Deployments, a workqueue of App keys (a child's event
// enqueues its controller), and workers that server-side apply both
// children (typed apply configurations) and the status (typed REST client,
// status subresource) on every pass; the API server turns applies that
// change nothing into no-ops.
type appController struct {
	cs    kubernetes.Interface
	rc    rest.Interface
	apps  cache.Indexer
	queue workqueue.TypedRateLimitingInterface[string]
}

func runApps(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, workers int) error {
	rc, err := appRESTClient(cfg)
	if err != nil {
		return err
	}
	appInf := appInformer(rc)
	factory := informers.NewSharedInformerFactory(cs, 0)
	cmInf := factory.Core().V1().ConfigMaps().Informer()
	deployInf := factory.Apps().V1().Deployments().Informer()
	c := &appController{
		cs: cs, rc: rc, apps: appInf.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := appInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	// A child's change enqueues the App that controls it.
	enqueueOwner := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "App" && ref.APIVersion == workload.WidgetGroupVersion.String() {
			c.queue.Add(m.GetNamespace() + "/" + ref.Name)
		}
	}
	for _, inf := range []cache.SharedIndexInformer{cmInf, deployInf} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueOwner, UpdateFunc: func(_, obj any) { enqueueOwner(obj) }, DeleteFunc: enqueueOwner,
		}); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	go appInf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), appInf.HasSynced, cmInf.HasSynced, deployInf.HasSynced) {
		return fmt.Errorf("caches did not sync")
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	factory.Shutdown()
	return nil
}

// next processes one key; false once the queue is shut down.
func (c *appController) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		utilruntime.HandleError(fmt.Errorf("sync %q: %w", key, err))
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *appController) sync(ctx context.Context, key string) error {
	obj, ok, err := c.apps.GetByKey(key)
	if err != nil || !ok {
		return err // deleted: the garbage collector removes the children
	}
	app := obj.(*workload.App)
	labels := workload.AppLabels(app.Name)
	owner := metav1ac.OwnerReference().
		WithAPIVersion(workload.WidgetGroupVersion.String()).WithKind("App").
		WithName(app.Name).WithUID(app.UID).
		WithController(true).WithBlockOwnerDeletion(true)
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}

	cm := corev1ac.ConfigMap(app.Name, app.Namespace).
		WithLabels(labels).WithOwnerReferences(owner).
		WithData(map[string]string{workload.AppDataKey: app.Spec.Data})
	if _, err := c.cs.CoreV1().ConfigMaps(app.Namespace).Apply(ctx, cm, apply); err != nil {
		return err
	}
	deploy := appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(labels).WithOwnerReferences(owner).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(app.Spec.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(
					corev1ac.Container().WithName(workload.AppContainer).WithImage(app.Spec.Image)))))
	if _, err := c.cs.AppsV1().Deployments(app.Namespace).Apply(ctx, deploy, apply); err != nil {
		return err
	}

	// The status, keeping the condition's transition time while it holds.
	cond := metav1.Condition{
		Type: workload.AppReady, Status: metav1.ConditionTrue, ObservedGeneration: app.Generation,
		Reason: "Applied", Message: "every child is applied", LastTransitionTime: metav1.Now(),
	}
	if old := app.ReadyCondition(); old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": workload.WidgetGroupVersion.String(),
		"kind":       "App",
		"metadata":   map[string]any{"name": app.Name, "namespace": app.Namespace},
		"status":     workload.AppStatus{ObservedGeneration: app.Generation, Conditions: []metav1.Condition{cond}},
	})
	if err != nil {
		return err
	}
	err = c.rc.Patch(types.ApplyPatchType).Namespace(app.Namespace).Resource("apps").Name(app.Name).SubResource("status").
		VersionedParams(&metav1.PatchOptions{FieldManager: fieldManager, Force: &apply.Force}, metav1.ParameterCodec).
		Body(body).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// appRESTClient is the typed REST client client-gen generates for Apps (JSON).
func appRESTClient(cfg *rest.Config) (rest.Interface, error) {
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
	return rest.RESTClientFor(c)
}

// appInformer is what informer-gen generates for Apps.
func appInformer(rc rest.Interface) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			out := &workload.AppList{}
			err := rc.Get().Resource("apps").VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return rc.Get().Resource("apps").VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(lw, &workload.App{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
}
