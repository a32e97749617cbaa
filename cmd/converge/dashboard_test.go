package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// dashboardPath is where init writes the Grafana dashboard.
const dashboardPath = "grafana/converge-dashboard.json"

// TestDashboardQueriesExportedMetrics: every metric the generated Grafana
// dashboard queries is one a running manager serves on /metrics, once a
// controller has reconciled an object, with its API requests made.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	files, err := render(Project{Module: "example.com/team/op", Name: "op", Domain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	var dashboard []byte
	for _, f := range files {
		if f.Path == dashboardPath {
			dashboard = f.Content
		}
	}
	if dashboard == nil {
		t.Fatalf("init writes no %s", dashboardPath)
	}
	queries := dashboardQueries(t, dashboard)
	wanted := metricNames(queries)
	if len(wanted) < 15 {
		t.Fatalf("the dashboard queries %d metrics (%q), want them all read", len(wanted), wanted)
	}
	exported := scrapeManager(t)
	var missing []string
	for _, name := range wanted {
		if !exported[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics a running manager does not serve: %q", missing)
	}
}

// dashboardQueries returns the PromQL of the dashboard's panels and
// template variables.
func dashboardQueries(t *testing.T, dashboard []byte) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardPath, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	return out
}

var (
	// promQLSkipped are the parts of a query that hold no metric name:
	// label matchers, grouping clauses, ranges, Grafana variables, strings.
	promQLSkipped = regexp.MustCompile(`\{[^}]*\}|\b(by|without|on|ignoring)\s*\([^)]*\)|\[[^\]]*\]|\$\w+|"[^"]*"`)
	// promQLName is a name not followed by "(" (which makes it a function).
	promQLName = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	// labelValues is Grafana's label_values(metric, label), which names
	// metric.
	labelValues = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*\w+\s*\)`)
	// histogramSeries are the suffixes of a histogram's series.
	histogramSeries = regexp.MustCompile(`_(bucket|sum|count)$`)
)

// metricNames returns the metric names in PromQL queries, each once,
// histograms by their series' name (x_bucket is x). label_values(m, l)
// names m.
func metricNames(queries []string) []string {
	var out []string
	for _, q := range queries {
		q = promQLSkipped.ReplaceAllString(q, " ")
		q = labelValues.ReplaceAllString(q, "$1")
		for _, m := range promQLName.FindAllStringSubmatch(q, -1) {
			name := m[0]
			if m[1] != "" || slices.Contains([]string{"and", "or", "unless", "bool", "offset"}, name) {
				continue
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// scrapeManager starts a manager on an API server in memory with one
// controller, waits until it reconciled a ConfigMap, and returns the
// names of the metrics its /metrics serves (a histogram's _bucket, _sum
// and _count as its name, and those names too).
func scrapeManager(t *testing.T) map[string]bool {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}
	srv := fake.Start(t, fake.Options{Objects: []object.Object{cm}})
	mgr, err := framework.NewManager(srv.Config(), framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	reconciled := make(chan struct{}, 1)
	err = framework.NewBuilder[*corev1.ConfigMap](mgr, "configmap", framework.ControllerOptions{}).Complete(reconcile.ObjectFunc[*corev1.ConfigMap](func(context.Context, *corev1.ConfigMap) (reconcile.Result, error) {
		select {
		case reconciled <- struct{}{}:
		default:
		}
		return reconcile.Result{}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-reconciled:
	case err := <-stopped:
		t.Fatalf("the manager stopped before it reconciled: %v", err)
	}
	// The reconcile is counted once Reconcile has returned: wait for it.
	body := ""
	for !strings.Contains(body, `controller_runtime_reconcile_total{controller="configmap",result="success"} 1`) {
		res, err := http.Get("http://" + mgr.MetricsAddress() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
		select {
		case <-t.Context().Done():
			t.Fatalf("the reconcile was never counted:\n%s", body)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return exportedMetrics(body)
}

// exportedMetrics returns the metric names of a Prometheus text exposition.
func exportedMetrics(body string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.Lines(body) {
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		names[name] = true
		names[histogramSeries.ReplaceAllString(name, "")] = true
	}
	return names
}

// metricNames reads names out of queries as the dashboard writes them.
func TestMetricNames(t *testing.T) {
	got := metricNames([]string{
		`histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{job=~"$job", controller=~"$controller"}[$__rate_interval])))`,
		`sum by (name) (workqueue_depth{job=~"$job"}) and on (name) up`,
		`label_values(controller_runtime_reconcile_total{job=~"$job"}, controller)`,
		`rate(process_cpu_seconds_total[5m])`,
	})
	want := []string{"controller_runtime_reconcile_time_seconds_bucket", "controller_runtime_reconcile_total", "process_cpu_seconds_total", "up", "workqueue_depth"}
	if !slices.Equal(got, want) {
		t.Errorf("metricNames = %q, want %q", got, want)
	}
}
