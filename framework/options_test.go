package framework_test

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/lease"
	"github.com/converge-dev/converge/sharding"
	"github.com/go-logr/logr"
)

func TestManagerOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts framework.Options
		want []string
	}{
		{"zero value", framework.Options{}, nil},
		{"sync heap ratio off", framework.Options{SyncHeapRatio: -1}, nil},
		{"sync heap ratio of 1", framework.Options{SyncHeapRatio: 1}, []string{"SyncHeapRatio must be negative"}},
		{"sync heap ratio NaN", framework.Options{SyncHeapRatio: math.NaN()}, []string{"got NaN"}},
		{"leader election defaults", framework.Options{LeaderElection: framework.LeaderElectionOptions{Enabled: true, ID: "x"}}, nil},
		{"leader election without ID", framework.Options{LeaderElection: framework.LeaderElectionOptions{Enabled: true}},
			[]string{"LeaderElection.ID is required"}},
		{"lease not longer than renew deadline", framework.Options{LeaderElection: framework.LeaderElectionOptions{
			Enabled: true,
			ID:      "x",
			Lease:   lease.Options{Duration: 10 * time.Second, RenewDeadline: 10 * time.Second},
		}},
			[]string{"Lease.Duration (10s) must be greater than RenewDeadline (10s)"}},
		{"renew deadline within jitter of retry", framework.Options{LeaderElection: framework.LeaderElectionOptions{
			Enabled: true,
			ID:      "x",
			Lease:   lease.Options{RenewDeadline: 5 * time.Second, RetryPeriod: 5 * time.Second},
		}},
			[]string{"RenewDeadline (5s) must be greater than 1.2 × RetryPeriod (5s)"}},
		{"invalid durations ignored while disabled", framework.Options{LeaderElection: framework.LeaderElectionOptions{
			Lease: lease.Options{RenewDeadline: time.Second, RetryPeriod: time.Hour},
		}}, nil},
		{"metrics and probes on one address", framework.Options{HealthProbeBindAddress: ":8080", Metrics: framework.MetricsOptions{BindAddress: ":8080"}},
			[]string{`both ":8080"`}},
		{"negative webhook limits", framework.Options{Webhook: framework.WebhookServerOptions{MaxRequestBytes: -1, WriteTimeout: -time.Second}},
			[]string{"Options.Webhook.MaxRequestBytes must not be negative, got -1", "Options.Webhook.WriteTimeout must not be negative, got -1s"}},
		{"clusters spread without a ring", framework.Options{Sharding: sharding.Options{Clusters: true}},
			[]string{"Options.Sharding.Clusters needs Options.Sharding.Ring"}},
		{"clusters spread over a ring", framework.Options{Sharding: sharding.Options{Ring: "r", Clusters: true}}, nil},
		{"clusters spread over a ring with leader election", framework.Options{Sharding: sharding.Options{Ring: "r", Clusters: true}, LeaderElection: framework.LeaderElectionOptions{Enabled: true, ID: "x"}}, nil},
		{"metrics and probes both on a port the kernel picks", framework.Options{HealthProbeBindAddress: "127.0.0.1:0", Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := framework.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, tc.opts)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    framework.LogOptions
		info    string // what logger.Info("hello") writes, "" for nothing
		v1      bool   // whether V(1) lines are written
		wantErr string
	}{
		{"text", framework.LogOptions{}, "level=INFO msg=hello k=v", false, ""},
		{"json", framework.LogOptions{Format: "json"}, `"msg":"hello","k":"v"`, false, ""},
		{"verbose", framework.LogOptions{Verbosity: 1}, "msg=hello", true, ""},
		{"bad format", framework.LogOptions{Format: "xml"}, "", false, `log format "xml"`},
		{"negative verbosity", framework.LogOptions{Verbosity: -1}, "", false, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.opts.Writer = &buf
			log, err := framework.NewLogger(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello", "k", "v")
			if !strings.Contains(buf.String(), tc.info) {
				t.Errorf("Info wrote %q, want it to contain %q", buf.String(), tc.info)
			}
			buf.Reset()
			log.V(1).Info("detail")
			if got := strings.Contains(buf.String(), "detail"); got != tc.v1 {
				t.Errorf("V(1) written = %v, want %v", got, tc.v1)
			}
		})
	}
}

func TestFlagsOptions(t *testing.T) {
	f := framework.Flags{LeaderElectionID: "prog"}
	fs := newFlagSet()
	f.Register(fs)
	if err := fs.Parse([]string{"--leader-elect", "--metrics-bind-address=0", "--health-probe-bind-address=:9000", "--log-format=json", "-v=2", "--graceful-shutdown-timeout=45s",
		"--webhook-cert-path=/certs", "--webhook-cert-name=cert.pem", "--webhook-cert-key=key.pem", "--enable-http2",
		"--metrics-cert-path=/mcerts", "--metrics-cert-name=m.pem", "--metrics-cert-key=mkey.pem",
		"--shard-ring=r", "--shard-key=namespace"}); err != nil {
		t.Fatal(err)
	}
	opts, err := f.Options()
	if err != nil {
		t.Fatal(err)
	}
	if !opts.LeaderElection.Enabled || opts.LeaderElection.ID != "prog" {
		t.Errorf("leader election = %+v, want enabled with ID prog", opts.LeaderElection)
	}
	if opts.Metrics.BindAddress != "" {
		t.Errorf(`--metrics-bind-address=0 gave %q, want "" (off)`, opts.Metrics.BindAddress)
	}
	if opts.HealthProbeBindAddress != ":9000" {
		t.Errorf("probe address = %q", opts.HealthProbeBindAddress)
	}
	if w := opts.Webhook; w.CertDir != "/certs" || w.CertName != "cert.pem" || w.KeyName != "key.pem" || !w.EnableHTTP2 || !opts.Metrics.EnableHTTP2 {
		t.Errorf("webhook options = %+v, metrics HTTP/2 %v; want the flags' folder and names, HTTP/2 on both", w, opts.Metrics.EnableHTTP2)
	}
	if m := opts.Metrics; m.CertDir != "/mcerts" || m.CertName != "m.pem" || m.KeyName != "mkey.pem" {
		t.Errorf("metrics options = %+v, want the --metrics-cert-* folder and names", m)
	}
	if opts.GracefulShutdownTimeout != 45*time.Second {
		t.Errorf("graceful shutdown timeout = %v, want 45s", opts.GracefulShutdownTimeout)
	}
	if !opts.Logger.V(2).Enabled() || opts.Logger.V(3).Enabled() {
		t.Error("-v=2 should enable V(2) and not V(3)")
	}
	if sh := opts.Sharding; sh.Ring != "r" || sh.Buckets.By != sharding.ByNamespace {
		t.Errorf("sharding = %+v, want ring r by namespace", sh)
	}
	bad := framework.Flags{ShardRing: "r", ShardKey: "name"}
	if _, err := bad.Options(); err == nil || !strings.Contains(err.Error(), `--shard-key="name"`) {
		t.Errorf("--shard-key=name: %v, want an error naming the flag and value", err)
	}
	alone := framework.Flags{ShardKey: "namespace"}
	if _, err := alone.Options(); err == nil || !strings.Contains(err.Error(), "needs --shard-ring") {
		t.Errorf("--shard-key without --shard-ring: %v, want an error saying it needs a ring", err)
	}
}

// A main ported from client-go calls klog.InitFlags(nil) before Register:
// Register must reuse klog's -v instead of panicking on a second one, and
// Options must read the level from it.
func TestFlagsReuseKlogVerbosity(t *testing.T) {
	fs := newFlagSet()
	klog.InitFlags(fs)
	var f framework.Flags
	f.Register(fs)
	if err := fs.Parse([]string{"-v=3"}); err != nil {
		t.Fatal(err)
	}
	opts, err := f.Options()
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Logger.V(3).Enabled() || opts.Logger.V(4).Enabled() {
		t.Error("klog's -v=3 should enable V(3) and not V(4)")
	}
	if f.Verbosity != 3 {
		t.Errorf("Flags.Verbosity = %d, want 3 read from klog's -v", f.Verbosity)
	}
}

// The zero Options give the logger Flags.Options gives without flags: slog
// text on standard error, with client-go's klog lines routed through it.
func TestDefaultLoggerRoutesKlog(t *testing.T) {
	// The default logger is made once per process and holds the standard
	// error it was made with, so the check runs in a process of its own.
	if os.Getenv("CONVERGE_DEFAULT_LOGGER_CHILD") == "1" {
		mgr, err := framework.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, framework.Options{})
		if err != nil {
			t.Fatal(err)
		}
		mgr.Logger().Info("from the manager")
		klog.InfoS("from client-go")
		klog.Flush()
		if mgr.Logger().V(1).Enabled() {
			t.Error("default logger should hide V(1)")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultLoggerRoutesKlog$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CONVERGE_DEFAULT_LOGGER_CHILD=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child test: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	for _, want := range []string{"level=INFO msg=\"from the manager\"", "level=INFO msg=\"from client-go\" logger=client-go"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("standard error %q lacks %q", stderr.String(), want)
		}
	}
}

// TestDefaultLoggerMadeOnce: managers without a Logger share one default
// logger, so building a second one never swaps klog's logger while the
// first logs (klog forbids that; the race detector sees it).
func TestDefaultLoggerMadeOnce(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	first, err := framework.NewManager(cfg, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := framework.NewManager(cfg, framework.Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if first.Logger().GetSink() != second.Logger().GetSink() {
		t.Error("two managers without a Logger got two default loggers (and routed klog twice)")
	}
}
