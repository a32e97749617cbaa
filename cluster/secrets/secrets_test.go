package secrets_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/informers"
)

// kubeconfig returns a kubeconfig for host whose user is user (YAML).
func kubeconfig(host, user string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user:
%s
`, host, user))
}

func secret(name string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Labels: map[string]string{secrets.DefaultLabel: "true"}},
		Data:       map[string][]byte{"kubeconfig": data},
	}
}

func TestConfigRefusesWhatOptionsDoNotAllow(t *testing.T) {
	p, err := secrets.New(secrets.Options{Namespace: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	exec := "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/steal, interactiveMode: Never}"
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" means accepted
	}{
		{"good", kubeconfig("https://edge.example:6443", "    token: abc"), ""},
		{"garbage", []byte("{not: [a kubeconfig"), "Secret fleet/garbage: data.kubeconfig: not a kubeconfig"},
		{"empty", nil, "Secret fleet/empty: data.kubeconfig: missing or empty"},
		{"token-file", kubeconfig("https://edge.example:6443", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"),
			"Secret fleet/token-file: data.kubeconfig: refused: users[u].tokenFile names a local file (/var/run/secrets/kubernetes.io/serviceaccount/token)"},
		{"cert-file", kubeconfig("https://edge.example:6443", "    client-certificate: /etc/tls.crt\n    client-key: /etc/tls.key"),
			"refused: users[u].client-certificate names a local file (/etc/tls.crt); users[u].client-key names a local file (/etc/tls.key)"},
		{"exec", kubeconfig("https://edge.example:6443", exec), "Secret fleet/exec: data.kubeconfig: refused: users[u].exec runs a command (/bin/steal)"},
		{"auth-provider", kubeconfig("https://edge.example:6443", "    auth-provider: {name: oidc}"), "users[u].auth-provider calls a plugin (oidc)"},
		{"no-context", []byte("apiVersion: v1\nkind: Config\n"), "Secret fleet/no-context: data.kubeconfig: invalid configuration"},
	} {
		cfg, err := p.Config(secret(tc.name, tc.data))
		switch {
		case tc.want == "" && (err != nil || cfg.Host != "https://edge.example:6443"):
			t.Errorf("%s: Config = %v, %v; want the host", tc.name, cfg, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Config error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// Allowed, exec is accepted.
	allowing, _ := secrets.New(secrets.Options{Namespace: "fleet", AllowExec: true})
	if _, err := allowing.Config(secret("exec", kubeconfig("https://edge.example:6443", exec))); err != nil {
		t.Errorf("AllowExec: %v", err)
	}
	if _, err := secrets.New(secrets.Options{}); err == nil || !strings.Contains(err.Error(), "Namespace is required") {
		t.Errorf("New without a namespace: %v", err)
	}
}

// engager records what a provider tells it.
type engager struct {
	local *cluster.Cluster
	mu    sync.Mutex
	calls []string
}

func (e *engager) Engage(t cluster.Target) error {
	e.add(fmt.Sprintf("engage %s %s %s", t.Name, t.Config.Host, t.Source))
	return nil
}
func (e *engager) Disengage(name string) { e.add("disengage " + name) }
func (e *engager) Fail(name, source string, err error) {
	e.add(fmt.Sprintf("fail %s %s: %v", name, source, err))
}
func (e *engager) Local() *cluster.Cluster { return e.local }
func (e *engager) add(c string)            { e.mu.Lock(); e.calls = append(e.calls, c); e.mu.Unlock() }
func (e *engager) has(prefix string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func TestProviderFollowsTheSecrets(t *testing.T) {
	srv := fake.Start(t, fake.Options{})
	local, err := cluster.New(cluster.Target{Config: srv.Config()}, informers.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = local.Cache().Start(ctx) }()
	e := &engager{local: local}
	p, _ := secrets.New(secrets.Options{Namespace: "fleet"})
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, e) }()

	cs := kubernetes.NewForConfigOrDie(srv.Config())
	create := func(s *corev1.Secret) {
		if _, err := cs.CoreV1().Secrets("fleet").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(secret("edge-1", kubeconfig("https://edge-1.example", "    token: a")))
	create(secret("bad", kubeconfig("https://bad.example", "    tokenFile: /token")))
	unlabelled := secret("other", kubeconfig("https://other.example", "    token: a"))
	unlabelled.Labels = nil
	create(unlabelled)
	waitFor(t, e, "engage edge-1 https://edge-1.example Secret fleet/edge-1")
	waitFor(t, e, "fail bad Secret fleet/bad: Secret fleet/bad: data.kubeconfig: refused: users[u].tokenFile")

	rotated := secret("edge-1", kubeconfig("https://edge-1b.example", "    token: b"))
	if _, err := cs.CoreV1().Secrets("fleet").Update(t.Context(), rotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "engage edge-1 https://edge-1b.example")
	if err := cs.CoreV1().Secrets("fleet").Delete(t.Context(), "edge-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "disengage edge-1")
	if e.has("engage other") {
		t.Error("an unlabelled Secret was engaged")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func waitFor(t *testing.T, e *engager, prefix string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return e.has(prefix), nil
	}); err != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		t.Fatalf("never %q; calls: %q", prefix, e.calls)
	}
}
