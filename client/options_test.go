package client_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

// New and NewAPIReader name the missing required option; NewAPIReader does
// not need a cache, and needs a configuration only without one.
func TestNewNamesTheMissingOption(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	scheme := runtime.NewScheme()
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, tc := range []struct {
		opts client.Options
		want string
	}{
		{client.Options{Scheme: scheme, Mapper: mapper}, "Options.Cache"},
		{client.Options{Config: cfg, Mapper: mapper}, "Options.Scheme"},
		{client.Options{Config: cfg, Scheme: scheme}, "Options.Mapper"},
		{client.Options{Config: cfg, Scheme: scheme, Mapper: mapper}, "Options.Cache"},
	} {
		if _, err := client.New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.opts, err, tc.want)
		}
	}
	if _, err := client.NewAPIReader(client.Options{Config: cfg, Scheme: scheme, Mapper: mapper}); err != nil {
		t.Errorf("NewAPIReader without a cache: %v", err)
	}
	if _, err := client.NewAPIReader(client.Options{Scheme: scheme, Mapper: mapper}); err == nil || !strings.Contains(err.Error(), "Options.Config") {
		t.Errorf("NewAPIReader without a configuration or a cache = %v, want an error naming Options.Config", err)
	}
}

// An option the constructor would not read is refused, naming it, rather
// than ignored.
func TestNewRefusesOptionsItWouldIgnore(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	scheme := runtime.NewScheme()
	mapper := meta.NewDefaultRESTMapper(nil)
	cache, err := informers.New(cfg, informers.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	fence := func() error { return nil }
	for _, tc := range []struct {
		name   string
		reader bool
		opts   client.Options
		want   string
	}{
		{"New: HTTPClient without Config", false, client.Options{Scheme: scheme, Mapper: mapper, Cache: cache, HTTPClient: http.DefaultClient}, "Options.HTTPClient is set without Options.Config"},
		{"NewAPIReader: HTTPClient without Config", true, client.Options{Scheme: scheme, Mapper: mapper, Cache: cache, HTTPClient: http.DefaultClient}, "Options.HTTPClient is set without Options.Config"},
		{"NewAPIReader: Fence", true, client.Options{Config: cfg, Scheme: scheme, Mapper: mapper, Fence: fence}, "Options.Fence is set, but an APIReader never writes"},
		{"NewAPIReader: Config and Cache", true, client.Options{Config: cfg, Scheme: scheme, Mapper: mapper, Cache: cache}, "Options.Config and Options.Cache are both set"},
	} {
		var err error
		if tc.reader {
			_, err = client.NewAPIReader(tc.opts)
		} else {
			_, err = client.New(tc.opts)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// The same options without the ignored field are accepted.
	if _, err := client.New(client.Options{Config: cfg, HTTPClient: http.DefaultClient, Scheme: scheme, Mapper: mapper, Cache: cache, Fence: fence}); err != nil {
		t.Errorf("New with Config, HTTPClient, Cache and Fence: %v", err)
	}
	if _, err := client.NewAPIReader(client.Options{Scheme: scheme, Mapper: mapper, Cache: cache}); err != nil {
		t.Errorf("NewAPIReader with a Cache only: %v", err)
	}
}

// A client built with New refuses writes while its fence fails, with an
// error naming the object and wrapping the fence's, and writes again once
// the fence allows it.
func TestNewFencesWrites(t *testing.T) {
	cfg := plane.Config(t)
	ns := testenv.Namespace(t, kubernetes.NewForConfigOrDie(cfg))
	mgr := testenv.NewManager(t, cfg, framework.Options{})
	testenv.StartManager(t, mgr)
	errFenced := errors.New("fenced for the test")
	var fenced atomic.Bool
	fenced.Store(true)
	c, err := client.New(client.Options{Config: mgr.Config(), Scheme: mgr.Scheme(), Mapper: mgr.RESTMapper(), Cache: mgr.Cache(),
		Fence: func() error {
			if fenced.Load() {
				return errFenced
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fenced"}}
	err = c.Create(t.Context(), cm)
	if !errors.Is(err, errFenced) || !strings.Contains(err.Error(), "ConfigMap "+ns+"/fenced") {
		t.Fatalf("Create while fenced = %v, want an error naming ConfigMap %s/fenced and wrapping the fence's", err, ns)
	}
	fenced.Store(false)
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatalf("Create once the fence allows it: %v", err)
	}
	var got corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "fenced"}, &got); err != nil || got.UID != cm.UID {
		t.Fatalf("Get after Create = %v (UID %q), want the created object (UID %q)", err, got.UID, cm.UID)
	}
}
