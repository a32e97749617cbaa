package envtest_test

import (
	"errors"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestUseExistingCluster(t *testing.T) {
	cluster := sharedEnv(t) // the "existing" cluster
	t.Setenv("KUBECONFIG", cluster.KubeconfigPath())
	t.Setenv(envtest.EnvUseExistingCluster, "true")
	ctx := t.Context()

	env := envtest.New(envtest.Options{}) // the variable turns UseExistingCluster on
	cfg, err := env.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer env.Stop()
	if cfg.Host != cluster.APIServerURL() {
		t.Errorf("Start returned host %s, want the kubeconfig's %s", cfg.Host, cluster.APIServerURL())
	}
	if _, err := clientset(t, cfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("get namespace default: %v", err)
	}
	kc, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath())
	if err != nil || kc.Host != cluster.APIServerURL() {
		t.Errorf("KubeconfigPath() %s: host %v, %v; want %s", env.KubeconfigPath(), kc, err, cluster.APIServerURL())
	}
	if env.EtcdURL() != "" {
		t.Errorf("EtcdURL() = %q, want empty for an existing cluster", env.EtcdURL())
	}
	if err := env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{"testdata/crds"}}); err != nil {
		t.Errorf("InstallCRDs: %v", err)
	}

	for name, err := range map[string]error{
		"StopAPIServer":    env.StopAPIServer(ctx),
		"StartAPIServer":   env.StartAPIServer(ctx),
		"RestartAPIServer": env.RestartAPIServer(ctx),
		"KillAPIServer":    env.KillAPIServer(),
		"CompactEtcd":      func() error { _, err := env.CompactEtcd(ctx); return err }(),
	} {
		if !errors.Is(err, envtest.ErrNotLocal) {
			t.Errorf("%s = %v, want ErrNotLocal", name, err)
		}
	}

	// AddUser impersonates: the user has no role, so it is forbidden.
	bobCfg, err := env.AddUser(envtest.User{Name: "bob"})
	if err != nil {
		t.Fatalf("AddUser: %v", err)
	}
	if bobCfg.Impersonate.UserName != "bob" {
		t.Errorf("AddUser config impersonates %q, want bob", bobCfg.Impersonate.UserName)
	}
	if _, err := clientset(t, bobCfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("bob lists pods: %v, want 403 Forbidden", err)
	}

	dir := env.Dir()
	if err := env.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("folder %s after Stop: %v, want it removed", dir, err)
	}
	if _, err := clientset(t, cluster.Config()).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the existing cluster after Stop: %v, want it untouched", err)
	}
}
