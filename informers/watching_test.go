package informers_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/faultproxy"
	"github.com/converge-dev/converge/internal/testenv"
)

// An informer whose connection was reset is not watching while client-go
// sends its watch request again, though no error reached it yet; it
// watches again once the connection is back.
func TestWatchingFalseWhileTheWatchIsSentAgain(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	u, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + proxy.Addr()
	c := started(t, cfg, informers.Options{Namespace: ns})
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitWatching := func(want bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return inf.Stats().Watching == want, nil
		})
		if err != nil {
			t.Fatalf("Watching is not %v: %+v", want, inf.Stats())
		}
	}
	waitWatching(true)

	proxy.SetMode(faultproxy.Reset, 0) // resets the watch, refuses its retries
	waitWatching(false)
	if st := inf.Stats(); st.Err != nil {
		t.Logf("the informer saw an error too: %v", st.Err)
	}
	testenv.CreateConfigMap(t, cs, ns, "meanwhile", nil)
	proxy.SetMode(faultproxy.Pass, 0)
	waitWatching(true)
	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return inf.Len() == 1, nil
	})
	if err != nil {
		t.Fatalf("the ConfigMap created while the connection was reset never reached the cache: %+v", inf.Stats())
	}
}
