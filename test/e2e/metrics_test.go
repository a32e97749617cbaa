package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// scrape is one scrape of a /metrics endpoint, parsed.
type scrape map[string]*dto.MetricFamily

// scrapeMetrics GETs url with client and parses the text exposition format.
func scrapeMetrics(ctx context.Context, client *http.Client, url string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// value returns the value of the series of family name whose labels include
// labels: a counter's or gauge's value, a histogram's sample count.
func (s scrape) value(name string, labels map[string]string) (float64, error) {
	f, ok := s[name]
	if !ok {
		return 0, fmt.Errorf("no metric %s", name)
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), nil
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), nil
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), nil
		}
	}
	return 0, fmt.Errorf("metric %s has no series with labels %v", name, labels)
}

// sum adds up the values of every series of family name whose labels
// include labels (0 when there is none).
func (s scrape) sum(name string, labels map[string]string) float64 {
	total := 0.0
	for _, m := range s[name].GetMetric() {
		if hasLabels(m, labels) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// seriesValue returns a function that scrapes url and reports one series'
// value, for Eventually.
func seriesValue(ctx context.Context, url, name string, labels map[string]string) func() (float64, error) {
	return func() (float64, error) {
		s, err := scrapeMetrics(ctx, http.DefaultClient, url)
		if err != nil {
			return 0, err
		}
		return s.value(name, labels)
	}
}

// controllerRuntimeMetrics are the series controller-runtime exports by
// default, as listed in its metrics reference (kubebuilder book, "Default
// Exported Metrics References").
var controllerRuntimeMetrics = []string{
	"workqueue_depth",
	"workqueue_adds_total",
	"workqueue_queue_duration_seconds",
	"workqueue_work_duration_seconds",
	"workqueue_unfinished_work_seconds",
	"workqueue_longest_running_processor_seconds",
	"workqueue_retries_total",
	"rest_client_requests_total",
	"controller_runtime_reconcile_total",
	"controller_runtime_reconcile_errors_total",
	"controller_runtime_terminal_reconcile_errors_total",
	"controller_runtime_reconcile_panics_total",
	"controller_runtime_reconcile_time_seconds",
	"controller_runtime_max_concurrent_reconciles",
	"controller_runtime_active_workers",
}

var _ = Describe("metrics", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("serves controller-runtime's series on /metrics, and they move as the controller works", func(ctx SpecContext) {
		const (
			lease      = "e2e-metrics"
			controller = "scraped"
			workers    = 3
		)
		opts := electing(ns, lease, "scraped-1", handover)
		opts.Metrics = framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}
		mgr := newManager(ns, opts)
		calls := newRecorder()
		hold, release := key(ns, "held"), make(chan struct{})
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, controller, framework.ControllerOptions{Workers: workers}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				calls.record(req)
				if req == hold {
					select { // busy until the spec has seen it busy
					case <-release:
					case <-ctx.Done():
					}
				}
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		Eventually(ctx, mgr.MetricsAddress).ShouldNot(BeEmpty())
		url := "http://" + mgr.MetricsAddress() + "/metrics"
		byController := map[string]string{"controller": controller}
		byQueue := map[string]string{"name": controller}
		Eventually(ctx, mgr.Elected()).Should(BeClosed())

		By("scraping before any object exists")
		before, err := scrapeMetrics(ctx, http.DefaultClient, url)
		Expect(err).NotTo(HaveOccurred())
		for name, labels := range map[string]map[string]string{
			"controller_runtime_reconcile_total":           {"controller": controller, "result": "success"},
			"controller_runtime_reconcile_time_seconds":    byController,
			"controller_runtime_active_workers":            byController,
			"controller_runtime_max_concurrent_reconciles": byController,
			"workqueue_adds_total":                         byQueue,
			"workqueue_depth":                              byQueue,
			"leader_election_master_status":                {"name": lease},
		} {
			_, err := before.value(name, labels)
			Expect(err).NotTo(HaveOccurred(), "series missing before any reconcile")
		}
		// controller-runtime's result labels, all exported from the start.
		for _, result := range []string{"success", "error", "requeue", "requeue_after"} {
			Expect(before.value("controller_runtime_reconcile_total", map[string]string{"controller": controller, "result": result})).
				To(BeEquivalentTo(0), "result %q", result)
		}
		Expect(before.value("controller_runtime_max_concurrent_reconciles", byController)).To(BeEquivalentTo(workers))
		Expect(before.value("leader_election_master_status", map[string]string{"name": lease})).To(BeEquivalentTo(1))
		Expect(before["converge_cache_objects"].GetMetric()).NotTo(BeEmpty(), "converge_cache_objects has no series")
		Expect(before.sum("converge_cache_objects", nil)).To(BeEquivalentTo(0))

		By("creating objects, one of which holds a worker")
		createConfigMap(ctx, ns, hold.Name, nil)
		Eventually(ctx, calls.count(hold)).Should(Equal(1))
		Eventually(ctx, seriesValue(ctx, url, "controller_runtime_active_workers", byController)).Should(BeEquivalentTo(1))
		const others = 5
		for i := range others {
			createConfigMap(ctx, ns, fmt.Sprintf("cm-%d", i), nil)
		}
		Eventually(ctx, seriesValue(ctx, url, "controller_runtime_reconcile_total", map[string]string{"controller": controller, "result": "success"})).
			Should(BeEquivalentTo(others))
		close(release)
		Eventually(ctx, seriesValue(ctx, url, "controller_runtime_active_workers", byController)).Should(BeEquivalentTo(0))

		after, err := scrapeMetrics(ctx, http.DefaultClient, url)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.value("controller_runtime_reconcile_total", map[string]string{"controller": controller, "result": "success"})).To(BeEquivalentTo(others + 1))
		Expect(after.value("controller_runtime_reconcile_time_seconds", byController)).To(BeEquivalentTo(others+1), "histogram sample count")
		Expect(after.value("workqueue_adds_total", byQueue)).To(BeNumerically(">=", others+1))
		Expect(after.value("workqueue_depth", byQueue)).To(BeEquivalentTo(0))
		Expect(after.sum("converge_cache_objects", nil)).To(BeEquivalentTo(others+1), "converge_cache_objects: %v", after["converge_cache_objects"])
		Expect(after.value("leader_election_master_status", map[string]string{"name": lease})).To(BeEquivalentTo(1))
		// The Go and process collectors are there too, as Prometheus users expect.
		Expect(after).To(HaveKey("go_goroutines"))
		Expect(after).To(HaveKey(HavePrefix("process_")))

		By("exporting every series controller-runtime documents, so its dashboards and alerts keep working")
		for _, name := range controllerRuntimeMetrics {
			Expect(after).To(HaveKey(name), "controller-runtime exports %s", name)
		}
		// client-go's requests: the cache's LIST and WATCH and the lease's
		// GET and PUT have gone through it by now.
		Expect(after.sum("rest_client_requests_total", map[string]string{"method": "GET", "code": "200"})).To(BeNumerically(">", 0))
		Expect(after["rest_client_request_duration_seconds"].GetMetric()).NotTo(BeEmpty())
	}, SpecTimeout(time.Minute))
})
