package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go reports its HTTP requests through the process-wide hooks of
// k8s.io/client-go/tools/metrics, which can be set once per process. These
// collectors receive them, and every manager's registry exports them, under
// the names controller-runtime and Kubernetes components use.
var (
	restRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})
	restLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Request latency in seconds, partitioned by verb and host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0},
	}, []string{"verb", "host"})
	registerRESTMetrics sync.Once
)

// restClientCollectors hooks client-go's request metrics up (once per
// process) and returns the collectors that export them. If something else
// in the process registered client-go's hooks first, client-go keeps that
// registration and these series stay empty.
func restClientCollectors() []prometheus.Collector {
	registerRESTMetrics.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:  restResult{},
			RequestLatency: restDuration{},
		})
	})
	return []prometheus.Collector{restRequests, restLatency}
}

type restResult struct{}

func (restResult) Increment(_ context.Context, code, method, host string) {
	restRequests.WithLabelValues(code, method, host).Inc()
}

type restDuration struct{}

func (restDuration) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	restLatency.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}
