package envtest

import (
	"context"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// startAPIServer starts kube-apiserver on a free loopback port and waits until it is
// ready (see apiServerReady).
func (lp *localPlane) startAPIServer(ctx context.Context, path string, extra []string) error {
	build := func() (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		lp.apiPort = ports[0]
		if lp.client, err = kubernetes.NewForConfig(lp.adminConfig()); err != nil {
			return nil, fmt.Errorf("admin client: %w", err)
		}
		return lp.newProcess(KubeAPIServer, path, mergeFlags(lp.apiServerFlags(), extra)), nil
	}
	p, err := startWithRetry(ctx, build, lp.apiServerReady)
	lp.apiServer = p
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	return nil
}

// apiServerFlags are the Environment's kube-apiserver flags. Serving is TLS only, on
// 127.0.0.1; authentication is by client certificate (and service account token),
// authorization by RBAC.
func (lp *localPlane) apiServerFlags() []string {
	return []string{
		"--etcd-servers=" + lp.etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(lp.apiPort),
		"--advertise-address=127.0.0.1",
		// Kubernetes 1.37 refuses a loopback advertise address with the default lease
		// endpoint reconciler ("may not be in the loopback range"): no Endpoints for the
		// kubernetes Service, which nothing outside a cluster needs.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + lp.certs,
		"--tls-cert-file=" + lp.cert("kube-apiserver.crt"),
		"--tls-private-key-file=" + lp.cert("kube-apiserver.key"),
		"--client-ca-file=" + lp.cert("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + lp.cert("service-account.pub"),
		"--service-account-signing-key-file=" + lp.cert("service-account.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// Without kube-controller-manager's token controller no service account gets a
		// token, and this plug-in would then refuse every pod.
		"--disable-admission-plugins=ServiceAccount",
	}
}

// apiServerReady checks, as the admin, that /readyz answers 200, that the default
// namespace exists and that the RBAC bootstrap roles (cluster-admin) exist.
func (lp *localPlane) apiServerReady(ctx context.Context) error {
	var code int
	res := lp.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
	if err := res.Error(); err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	if code != 200 {
		return fmt.Errorf("GET /readyz: status %d", code)
	}
	if _, err := lp.client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get namespace default: %w", err)
	}
	if _, err := lp.client.RbacV1().ClusterRoles().Get(ctx, "cluster-admin", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("get clusterrole cluster-admin: %w", err)
	}
	return nil
}

// StopAPIServer stops kube-apiserver: SIGTERM, then SIGKILL after a few seconds or once
// ctx is done. etcd and its data stay, so StartAPIServer brings the same cluster back.
// It is a no-op when kube-apiserver is not running, and returns ErrNotLocal for an
// existing cluster.
func (e *Environment) StopAPIServer(ctx context.Context) error {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	lp, err := e.localStarted()
	if err != nil {
		return err
	}
	if err := lp.apiServer.stop(ctx); err != nil {
		return fmt.Errorf("envtest: stop kube-apiserver: %w", err)
	}
	return nil
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would, and returns once it
// has exited. etcd and its data stay. It is a no-op when kube-apiserver is not running,
// and returns ErrNotLocal for an existing cluster.
func (e *Environment) KillAPIServer() error {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	lp, err := e.localStarted()
	if err != nil {
		return err
	}
	if err := lp.apiServer.kill(); err != nil {
		return fmt.Errorf("envtest: kill kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer or KillAPIServer, on the
// same port with the same certificates and etcd data, so existing clients reconnect, and
// waits until it is ready, as Start does (bounded by ctx and Options.StartTimeout). It is
// a no-op when kube-apiserver runs, and returns ErrNotLocal for an existing cluster.
func (e *Environment) StartAPIServer(ctx context.Context) error {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	lp, err := e.localStarted()
	if err != nil {
		return err
	}
	return e.startAPIServerLocked(ctx, lp)
}

// RestartAPIServer is StopAPIServer followed by StartAPIServer, with no other lifecycle
// method in between.
func (e *Environment) RestartAPIServer(ctx context.Context) error {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	lp, err := e.localStarted()
	if err != nil {
		return err
	}
	if err := lp.apiServer.stop(ctx); err != nil {
		return fmt.Errorf("envtest: restart kube-apiserver: stop: %w", err)
	}
	return e.startAPIServerLocked(ctx, lp)
}

// startAPIServerLocked starts lp's stopped kube-apiserver again and waits until it is
// ready. The caller holds lifecycle.
func (e *Environment) startAPIServerLocked(ctx context.Context, lp *localPlane) error {
	if lp.apiServer.running() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	if err := lp.apiServer.start(); err != nil {
		return fmt.Errorf("envtest: start kube-apiserver: %w", err)
	}
	if err := lp.apiServer.waitReady(ctx, lp.apiServerReady); err != nil {
		return fmt.Errorf("envtest: start kube-apiserver on port %d: %w", lp.apiPort, err)
	}
	return nil
}
