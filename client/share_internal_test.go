package client

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/informers"
)

// A Client and an APIReader built on a cache without a configuration of
// their own send their requests with the cache's REST client of each group
// version, the very one the cache lists and watches with; given a
// configuration, they make their own.
func TestClientsShareTheCacheRESTClients(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // no request is sent
	mapper := meta.NewDefaultRESTMapper(nil)
	cache, err := informers.New(cfg, informers.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	shared := Options{Scheme: clientgoscheme.Scheme, Mapper: mapper, Cache: cache}
	c, err := New(shared)
	if err != nil {
		t.Fatal(err)
	}
	api, err := NewAPIReader(shared)
	if err != nil {
		t.Fatal(err)
	}
	own := shared
	own.Config = cfg
	ownClient, err := New(own)
	if err != nil {
		t.Fatal(err)
	}
	for _, gv := range []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "example.com", Version: "v1"}} {
		want, err := cache.RESTClient(gv)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := cache.RESTClient(gv); again != want {
			t.Errorf("%v: the cache made a second REST client", gv)
		}
		if got, _ := c.rest(gv); got != want {
			t.Errorf("%v: the client writes with a REST client of its own, want the cache's", gv)
		}
		if got, _ := api.rest(gv); got != want {
			t.Errorf("%v: the API reader reads with a REST client of its own, want the cache's", gv)
		}
		if got, _ := ownClient.rest(gv); got == want || got == nil {
			t.Errorf("%v: a client with a Config of its own got %p, want a REST client other than the cache's %p", gv, got, want)
		}
	}
}
