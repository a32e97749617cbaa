package envtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// controllers are the kube-controller-manager controllers an Environment runs, by their
// canonical names (Kubernetes 1.37 still accepts the old aliases garbagecollector,
// namespace and ttl-after-finished as well).
var controllers = []string{"garbage-collector-controller", "namespace-controller", "ttl-after-finished-controller"}

// startControllerManager starts kube-controller-manager with the garbage collector, the
// namespace controller and the controller deleting finished Jobs after their
// ttlSecondsAfterFinished, authenticating as the admin, and waits until its /healthz answers
// 200 over TLS with a certificate from the Environment's CA.
func (lp *localPlane) startControllerManager(ctx context.Context, path string) error {
	pool := x509.NewCertPool()
	pool.AddCert(lp.ca.cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()

	var healthz string
	build := func() (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		healthz = fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
		return lp.newProcess(KubeControllerManager, path, []string{
			"--kubeconfig=" + lp.kubeconfig,
			// No --authentication/authorization-kubeconfig: /healthz is always allowed,
			// and delegated authentication would want a front-proxy CA this plane lacks.
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + lp.cert("kube-controller-manager.crt"),
			"--tls-private-key-file=" + lp.cert("kube-controller-manager.key"),
			"--root-ca-file=" + lp.cert("ca.crt"),
			"--service-account-private-key-file=" + lp.cert("service-account.key"),
		}), nil
	}
	ready := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", healthz, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
	p, err := startWithRetry(ctx, build, ready)
	lp.controllerManager = p
	if err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	return nil
}
