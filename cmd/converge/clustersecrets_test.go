package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/testenv"
)

// runWithClusterSecrets builds the project in dir and runs it with
// --cluster-secrets-namespace on a control plane holding its CRDs and a
// kubeconfig Secret (of that same control plane) in that namespace: the
// manager engages the Secret's cluster, and stops on SIGTERM.
func runWithClusterSecrets(t *testing.T, dir string) {
	t.Helper()
	env := envtest.New(envtest.Options{CRDs: envtest.CRDOptions{Paths: []string{filepath.Join(dir, "config", "crd", "bases")}}})
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	cfg, err := env.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	kubeconfig, err := envtest.Kubeconfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{secrets.DefaultLabel: "true"}},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	if _, err := kube.CoreV1().Secrets("fleet").Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "op")
	goCmd(t, dir, "build", "-o", bin, ".")
	var out testenv.Buffer
	cmd := exec.CommandContext(t.Context(), bin, "--kubeconfig", env.KubeconfigPath(), "--health-probe-bind-address=0", "--cluster-secrets-namespace", "fleet")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	testenv.Eventually(t, "the manager engages the cluster of Secret fleet/edge-1", func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "engaged cluster") && strings.Contains(line, "edge-1") {
				return true
			}
		}
		return false
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = <-done
	waited = true
	if err != nil {
		t.Fatalf("the project's manager did not stop cleanly on SIGTERM: %v\n%s", err, out.String())
	}
}
