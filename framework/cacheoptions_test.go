package framework_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

// Options.Cache's Scheme, Mapper and HTTPClient are the whole manager's when
// set (they used to be overwritten without a word), and a combination the
// manager could not honour is refused, naming the fields.
func TestManagerHonoursCacheSchemeMapperAndHTTPClient(t *testing.T) {
	srv := fake.Start(t, fake.Options{})
	cfg := srv.Config()

	t.Run("Scheme", func(t *testing.T) {
		s := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(s); err != nil {
			t.Fatal(err)
		}
		mgr := testenv.NewManager(t, cfg, framework.Options{Cache: informers.Options{Scheme: s}})
		if mgr.Scheme() != s || mgr.Cache().Scheme() != s {
			t.Error("the manager or its cache does not use Options.Cache.Scheme")
		}
		_, err := framework.NewManager(cfg, framework.Options{Scheme: runtime.NewScheme(), Cache: informers.Options{Scheme: s}})
		if err == nil || !strings.Contains(err.Error(), "Options.Scheme and Options.Cache.Scheme are different schemes") {
			t.Errorf("two different schemes = %v, want an error naming both fields", err)
		}
		if _, err := framework.NewManager(cfg, framework.Options{Scheme: s, Cache: informers.Options{Scheme: s}}); err != nil {
			t.Errorf("the same scheme in both fields: %v", err)
		}
	})

	t.Run("Mapper", func(t *testing.T) {
		mapper := meta.NewDefaultRESTMapper(nil)
		mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
		mgr := testenv.NewManager(t, cfg, framework.Options{Cache: informers.Options{Mapper: mapper}})
		if mgr.RESTMapper() != meta.RESTMapper(mapper) {
			t.Error("Manager.RESTMapper is not Options.Cache.Mapper")
		}
		// The client maps with it too: a kind it lacks does not map.
		err := mgr.Client().Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})
		if !meta.IsNoMatchError(err) {
			t.Errorf("Create of a kind the mapper lacks = %v, want a no-match error", err)
		}
	})

	t.Run("HTTPClient", func(t *testing.T) {
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var sent atomic.Int64
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return rt.RoundTrip(r)
		})}
		mgr := testenv.NewManager(t, cfg, framework.Options{Cache: informers.Options{HTTPClient: hc}})
		api := mgr.APIReader()
		var cm corev1.ConfigMap
		_ = api.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "none"}, &cm)
		if sent.Load() == 0 {
			t.Error("a read sent no request through Options.Cache.HTTPClient")
		}
		_, err = framework.NewManager(cfg, framework.Options{DisableCompression: true, Cache: informers.Options{HTTPClient: hc}})
		if err == nil || !strings.Contains(err.Error(), "Options.DisableCompression") || !strings.Contains(err.Error(), "Options.Cache.HTTPClient") {
			t.Errorf("DisableCompression with a HTTPClient = %v, want an error naming both fields", err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
