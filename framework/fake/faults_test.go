package fake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/framework/fake"
)

func clientset(t *testing.T, srv *fake.Server, identity string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(srv.ConfigAs(identity))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// An Interceptor answers the writes it picks with a 409 Conflict or a 500
// (without Retry-After, so the client does not retry), which then change
// nothing; it sees every request with its identity, verb and object, and
// the status code of the ones it lets the server answer.
func TestInterceptAnswersWrites(t *testing.T) {
	ctx := t.Context()
	srv := fake.Start(t, fake.Options{Scheme: scheme.Scheme})
	var (
		mu   sync.Mutex
		seen []string
	)
	srv.Intercept(func(req fake.Request, serve func() int) error {
		switch {
		case req.Identity == "a" && req.Verb == "create" && req.Name == "one" && req.Kind.Kind == "ConfigMap":
			return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("injected"))
		case req.Identity == "a" && req.Verb == "delete":
			return apierrors.NewInternalError(errors.New("injected"))
		}
		code := serve()
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %d", req.Identity, req, code))
		mu.Unlock()
		return nil
	})
	a, b := clientset(t, srv, "a"), clientset(t, srv, "b")

	_, err := a.CoreV1().ConfigMaps("ns").Create(ctx, configMap("one"), metav1.CreateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("an intercepted create: got %v, want a Conflict", err)
	}
	if _, err := b.CoreV1().ConfigMaps("ns").Get(ctx, "one", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the answered create reached the store: %v", err)
	}
	if _, err := b.CoreV1().ConfigMaps("ns").Create(ctx, configMap("one"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = a.CoreV1().ConfigMaps("ns").Delete(ctx, "one", metav1.DeleteOptions{})
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError {
		t.Fatalf("an intercepted delete: got %v, want a 500", err)
	}
	if d := status.Status().Details; d != nil && d.RetryAfterSeconds != 0 {
		t.Errorf("the 500 asks for a retry after %ds", d.RetryAfterSeconds)
	}
	if _, err := a.CoreV1().ConfigMaps("ns").Get(ctx, "one", metav1.GetOptions{}); err != nil {
		t.Fatalf("the answered delete deleted: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"b get v1 ConfigMap ns/one 404", "b create v1 ConfigMap ns/one 201", "a get v1 ConfigMap ns/one 200"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("served requests:\n got %q\nwant %q", seen, want)
	}
}

// A crash lets exactly the first k writes of an identity commit, however
// many it sends at once; later writes fail with ErrCrashed and change
// nothing, while the identity's reads and other identities' writes go on.
func TestCrashAfterRefusesLaterWrites(t *testing.T) {
	ctx := t.Context()
	srv := fake.Start(t, fake.Options{Scheme: scheme.Scheme})
	a, b := clientset(t, srv, "a"), clientset(t, srv, "b")
	crashed := srv.CrashAfter("a", 3)

	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for i := range 10 {
		wg.Go(func() {
			_, err := a.CoreV1().ConfigMaps("ns").Create(ctx, configMap(fmt.Sprint("cm", i)), metav1.CreateOptions{})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, fake.ErrCrashed):
				refused.Add(1)
			default:
				t.Errorf("create %d: %v, want success or ErrCrashed", i, err)
			}
		})
	}
	wg.Wait()
	select {
	case <-crashed:
	default:
		t.Fatal("the crash did not happen after 3 writes")
	}
	if ok.Load() != 3 || refused.Load() != 7 {
		t.Errorf("writes: %d committed and %d refused, want 3 and 7", ok.Load(), refused.Load())
	}
	list, err := a.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("a read after the crash: %v", err)
	}
	if len(list.Items) != 3 {
		t.Errorf("stored %d objects, want the 3 committed", len(list.Items))
	}
	if err := a.CoreV1().ConfigMaps("ns").Delete(ctx, list.Items[0].Name, metav1.DeleteOptions{}); !errors.Is(err, fake.ErrCrashed) {
		t.Errorf("a delete after the crash: got %v, want ErrCrashed", err)
	}
	if _, err := b.CoreV1().ConfigMaps("ns").Create(ctx, configMap("other"), metav1.CreateOptions{}); err != nil {
		t.Errorf("another identity's write: %v", err)
	}
	if again := srv.CrashAfter("a", 100); again != crashed {
		t.Error("arming a crashed identity again revived it")
	}
}

// A lagging watch sends an event only once the given number of later
// ones wait behind it, in order; a change its own identity makes flushes
// it, and ending the lag releases the rest.
func TestLagWatchesHoldsEvents(t *testing.T) {
	ctx := t.Context()
	srv := fake.Start(t, fake.Options{Scheme: scheme.Scheme})
	admin, a := clientset(t, srv, ""), clientset(t, srv, "a")
	srv.LagWatches("a", 2)
	// The watch starts at the list's resourceVersion, so the creates below
	// reach it as events, whenever its request is served.
	list, err := a.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.CoreV1().ConfigMaps("ns").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	create := func(cs kubernetes.Interface, name string) {
		t.Helper()
		if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(admin, "one")
	create(admin, "two")
	create(admin, "three")
	if got := eventName(next(t, w)); got != "ADDED one" {
		t.Fatalf("first event: %s, want ADDED one", got)
	}
	// Two events wait behind "one": none may come. A negative check needs
	// a bound; it can only pass wrongly (on a machine stalled for longer),
	// never fail wrongly.
	select {
	case e := <-w.ResultChan():
		t.Fatalf("a lag of 2 sent %s with only 1 event behind it", eventName(e))
	case <-time.After(300 * time.Millisecond):
	}
	create(admin, "four")
	if got := eventName(next(t, w)); got != "ADDED two" {
		t.Fatalf("after one more change: %s, want ADDED two", got)
	}
	create(a, "mine")
	for _, want := range []string{"ADDED three", "ADDED four", "ADDED mine"} {
		if got := eventName(next(t, w)); got != want {
			t.Fatalf("after the identity's own change: %s, want %s", got, want)
		}
	}
	create(admin, "five")
	// Caught up but for what the lag holds, once the stream took "five".
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return srv.WatchesCaughtUp("a"), nil
	}); err != nil {
		t.Error("WatchesCaughtUp stays false with every event sent or held back by the lag")
	}
	srv.LagWatches("a", 0)
	if got := eventName(next(t, w)); got != "ADDED five" {
		t.Fatalf("after the lag ended: %s, want ADDED five", got)
	}
	// The stream records what it sent just after sending it.
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return srv.WatchesCaughtUp("a"), nil
	}); err != nil {
		t.Error("WatchesCaughtUp stays false after every event was received")
	}
}
