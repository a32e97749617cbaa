package envtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// adminUser and adminGroup are the identity of Config's client certificate.
	adminUser  = "converge-admin"
	adminGroup = "system:masters"
	// startAttempts is how often a process is started on fresh ports when another
	// process took one of them first.
	startAttempts = 3
)

// localPlane is a control plane of local processes in one folder. Its fields are set while
// Start runs and are then immutable, except for the processes, which the Environment's
// lifecycle lock guards.
type localPlane struct {
	dir    string
	certs  string    // dir/certs
	output io.Writer // serialized Options.Output, or nil for log files

	ca     *authority
	admin  keyPair
	client *kubernetes.Clientset // admin

	etcdURL    string
	apiPort    int
	kubeconfig string // admin kubeconfig, also used by kube-controller-manager

	etcd              *process
	apiServer         *process
	controllerManager *process // nil unless Options.ControllerManager
}

// binaries are the paths of the binaries a local control plane needs.
type binaries struct {
	etcd, apiServer, controllerManager string // controllerManager only when asked for
}

// findBinaries looks up the binaries that e's options need; errors are
// *MissingBinaryError.
func (e *Environment) findBinaries() (binaries, error) {
	var b binaries
	var errs []error
	find := func(dst *string, name string) {
		p, err := FindBinary(name, e.opts.BinaryAssetsDirectory)
		*dst = p
		if err != nil {
			errs = append(errs, err)
		}
	}
	find(&b.etcd, Etcd)
	find(&b.apiServer, KubeAPIServer)
	if e.opts.ControllerManager {
		find(&b.controllerManager, KubeControllerManager)
	}
	return b, errors.Join(errs...)
}

// startLocal starts etcd, kube-apiserver and maybe kube-controller-manager in a new
// temporary folder and waits until they are ready. The caller holds lifecycle and tears
// down on error.
func (e *Environment) startLocal(ctx context.Context) error {
	bins, err := e.findBinaries()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "converge-envtest-")
	if err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	lp := &localPlane{dir: dir, certs: filepath.Join(dir, "certs"), kubeconfig: filepath.Join(dir, "kubeconfig")}
	if e.opts.Output != nil {
		lp.output = &syncWriter{w: e.opts.Output}
	}
	e.mu.Lock()
	e.dir, e.local = dir, lp // from here on, teardown cleans up
	e.mu.Unlock()

	if err := lp.generateCerts(); err != nil {
		return err
	}
	if err := lp.startEtcd(ctx, bins.etcd, e.opts.EtcdFlags); err != nil {
		return err
	}
	if err := lp.startAPIServer(ctx, bins.apiServer, e.opts.APIServerFlags); err != nil {
		return err
	}
	cfg := lp.adminConfig()
	if err := WriteKubeconfig(lp.kubeconfig, cfg); err != nil {
		return err
	}
	e.mu.Lock()
	e.cfg, e.kubeconfigPath, e.etcdURL = cfg, lp.kubeconfig, lp.etcdURL
	e.mu.Unlock()
	if !e.opts.CRDs.isZero() {
		// Before kube-controller-manager starts: its garbage collector
		// discovers kinds at start and then only every 30 seconds.
		if err := e.installCRDs(ctx, e.opts.CRDs); err != nil {
			return err
		}
	}
	if e.opts.ControllerManager {
		if err := lp.startControllerManager(ctx, bins.controllerManager); err != nil {
			return err
		}
	}
	return nil
}

// generateCerts makes the CA and every certificate and key the processes read, and
// writes them into lp.certs.
func (lp *localPlane) generateCerts() error {
	if err := os.Mkdir(lp.certs, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", lp.certs, err)
	}
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	apiServer, err := ca.serving("kube-apiserver", []string{
		"127.0.0.1", "::1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		"10.0.0.1", // the kubernetes Service's cluster IP in --service-cluster-ip-range
	})
	if err != nil {
		return err
	}
	controllerManager, err := ca.serving("kube-controller-manager", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	admin, err := ca.client(adminUser, []string{adminGroup})
	if err != nil {
		return err
	}
	saKey, saPub, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	lp.ca, lp.admin = ca, admin
	return writeFiles(lp.certs, map[string][]byte{
		"ca.crt":                      ca.certPEM,
		"kube-apiserver.crt":          apiServer.certPEM,
		"kube-apiserver.key":          apiServer.keyPEM,
		"kube-controller-manager.crt": controllerManager.certPEM,
		"kube-controller-manager.key": controllerManager.keyPEM,
		"service-account.key":         saKey,
		"service-account.pub":         saPub,
	})
}

// cert returns the path of a file written by generateCerts.
func (lp *localPlane) cert(name string) string { return filepath.Join(lp.certs, name) }

// newProcess returns a process of this plane logging to <dir>/<name>.log or Output.
func (lp *localPlane) newProcess(name, path string, args []string) *process {
	p := &process{name: name, path: path, args: args, output: lp.output}
	if lp.output == nil {
		p.logPath = filepath.Join(lp.dir, name+".log")
	}
	return p
}

// startWithRetry starts the process that build returns for fresh ports and waits for it
// with ready, starting again on new ports when the process found a port taken.
func startWithRetry(ctx context.Context, build func() (*process, error), ready func(context.Context) error) (*process, error) {
	for attempt := 1; ; attempt++ {
		p, err := build()
		if err != nil {
			return nil, err
		}
		if err := p.start(); err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, ready)
		if err == nil {
			return p, nil
		}
		_ = p.kill()
		if !p.addrInUse() || attempt == startAttempts || ctx.Err() != nil {
			return p, err
		}
	}
}

// adminConfig returns the admin config of kube-apiserver on lp.apiPort.
func (lp *localPlane) adminConfig() *rest.Config {
	return lp.userConfig(lp.admin)
}

// userConfig returns a config authenticating with kp's client certificate.
func (lp *localPlane) userConfig(kp keyPair) *rest.Config {
	return &rest.Config{
		Host: fmt.Sprintf("https://127.0.0.1:%d", lp.apiPort),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   lp.ca.certPEM,
			CertData: kp.certPEM,
			KeyData:  kp.keyPEM,
		},
		QPS:   1000,
		Burst: 2000,
	}
}

// stopAll stops kube-controller-manager, kube-apiserver and etcd, in that order. The
// caller holds lifecycle.
func (lp *localPlane) stopAll() error {
	ctx := context.Background() // Stop has no context: each process gets stopGrace
	var errs []error
	for _, p := range []*process{lp.controllerManager, lp.apiServer, lp.etcd} {
		if p != nil {
			errs = append(errs, p.stop(ctx))
		}
	}
	return errors.Join(errs...)
}

// WriteKubeconfig writes a kubeconfig file for cfg (host, CA and client
// certificate, as Start and AddUser make them), for processes that take
// --kubeconfig. A bearer token in cfg is written too.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	if err := clientcmd.WriteToFile(*kubeconfig(cfg), path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// Kubeconfig returns the kubeconfig WriteKubeconfig writes, as YAML: every
// certificate embedded, no file named, so it can travel in a Secret.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	data, err := clientcmd.Write(*kubeconfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig for %s: %w", cfg.Host, err)
	}
	return data, nil
}

// kubeconfig is cfg as a kubeconfig of one context.
func kubeconfig(cfg *rest.Config) *clientcmdapi.Config {
	const name = "converge-envtest"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: adminUser, Namespace: "default"}
	kc.CurrentContext = name
	return kc
}
