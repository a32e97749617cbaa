package informers_test

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/testenv"
)

// plane is the control plane shared by this package's integration tests,
// started on first use.
var plane testenv.Plane

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// requestLog records the API requests a config makes.
type requestLog struct {
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method, path, query, accept string
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.requests = append(l.requests, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept")})
			l.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// matching returns the recorded requests whose path ends with suffix.
func (l *requestLog) matching(suffix string) []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recorded
	for _, r := range l.requests {
		if strings.HasSuffix(r.path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func envtestUser(name string) envtest.User { return envtest.User{Name: name} }
