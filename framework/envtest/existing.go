package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// startExisting loads the current kubeconfig (clientcmd's default loading rules:
// $KUBECONFIG, else ~/.kube/config), checks that the cluster answers, and writes a
// self-contained copy of the current context to a temporary folder for KubeconfigPath.
// The caller holds lifecycle and tears down on error.
func (e *Environment) startExisting(ctx context.Context) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("use existing cluster: load kubeconfig: %w", err)
	}
	raw, err := loader.RawConfig()
	if err != nil {
		return fmt.Errorf("use existing cluster: load kubeconfig: %w", err)
	}
	if err := clientcmdapi.MinifyConfig(&raw); err != nil {
		return fmt.Errorf("use existing cluster: current context: %w", err)
	}
	if err := clientcmdapi.FlattenConfig(&raw); err != nil {
		return fmt.Errorf("use existing cluster: embed kubeconfig files: %w", err)
	}

	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("use existing cluster %s: %w", cfg.Host, err)
	}
	// ServerVersion takes no context; RESTClient does.
	if err := disc.RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("use existing cluster %s: GET /version: %w", cfg.Host, err)
	}

	dir, err := os.MkdirTemp("", "converge-envtest-")
	if err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	e.mu.Lock()
	e.dir = dir
	e.mu.Unlock()
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(raw, path); err != nil {
		return fmt.Errorf("use existing cluster: write kubeconfig %s: %w", path, err)
	}
	e.mu.Lock()
	e.cfg, e.kubeconfigPath = cfg, path
	e.mu.Unlock()
	return nil
}
