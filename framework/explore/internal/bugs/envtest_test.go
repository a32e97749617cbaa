// Package bugs_test runs the fixed versions of the ported bugs on a test
// control plane: they pass there too.
package bugs_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/explore"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/api"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/finalizer"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/noretry"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/ownerref"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/staledelete"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/stalestatus"
	"github.com/converge-dev/converge/framework/explore/internal/bugs/tlscreate"
)

// quickEnvtestSchedules is the budget per fixed version in go test; with
// EXPLORE_SCHEDULES set (make explore), each runs the default,
// explore.DefaultEnvtestSchedules.
const quickEnvtestSchedules = 3

func TestFixedVersionsPassOnEnvtest(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a test control plane")
	}
	env := envtest.New(envtest.Options{APIServerFlags: []string{"--watch-cache=false"}})
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"db", "external"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	schedules := quickEnvtestSchedules
	if n, err := strconv.Atoi(os.Getenv("EXPLORE_SCHEDULES")); err == nil && n > 0 {
		schedules = 0
	}
	for _, tc := range []struct {
		name string
		opts explore.Options
	}{
		{"finalizer", finalizer.Options(finalizer.Fixed)},
		{"noretry", noretry.Options(noretry.Fixed)},
		{"ownerref", ownerref.Options(ownerref.Fixed)},
		{"staledelete", staledelete.Options(staledelete.Fixed)},
		{"stalestatus", stalestatus.Options(stalestatus.Fixed)},
		{"tlscreate", tlscreate.Options(tlscreate.Fixed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Envtest = env
			opts.CRDs = append(opts.CRDs, api.CRD())
			opts.Schedules = schedules
			opts.Faults.Kinds = nil // every fault of the real plane
			f, err := explore.Check(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if f != nil {
				t.Fatalf("the fixed version fails on envtest:\n%s", f)
			}
		})
	}
}
